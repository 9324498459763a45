// The course's tokenizers in JavaScript: reads a tokenizer.json that Hugging Face `tokenizers` wrote
// (code/bertgpt/models/NAME/tokenizer.json) and gives the ids that `checkpoint.tokenizer.encode`
// gives in Python (tests/test_tokenizer_js.py checks 200 held-out sentences and every character).
//
// It ports exactly the parts those files use, and refuses any other:
//   special tokens  matched in the raw text first ("[MASK]" stays whole), as `added_tokens` says
//   normalizers     NFKC + Lowercase (gpt-mini's BPE), BertNormalizer (bert-mini's WordPiece)
//   pre-tokenizer   BertPreTokenizer: split on white space, each punctuation mark on its own
//   models          BPE (GPT-1's, with the end-of-word suffix "</w>"), WordPiece ("##" pieces)
//   decoders        BPEDecoder, WordPiece
// No post-processor: like the package, it adds no special tokens around the text.
//
//   const tok = Tokenizer.fromJSON(await (await fetch("bert-mini.tokenizer.json")).json());
//   tok.encode("the state of the [MASK]")   // [ ... , 4 ]

const ASCII_PUNCTUATION = new Set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");
const WHITE_SPACE = /\p{White_Space}/u;
const PUNCTUATION = /\p{P}/u;
const OTHER = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}]/u; // what BertNormalizer's clean_text drops (not Cn: unassigned stays)
const NONSPACING_MARK = /\p{Mn}/gu;

function lowercase(text) {
  // One character at a time, as Rust's char::to_lowercase (no context rule for a final sigma).
  let out = "";
  for (const c of text) out += c.toLowerCase();
  return out;
}

function isChinese(cp) {
  return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
}

function bertNormalize(text, spec) {
  let out = "";
  for (const c of text) {
    if (spec.clean_text) {
      const cp = c.codePointAt(0);
      const control = c !== "\t" && c !== "\n" && c !== "\r" && OTHER.test(c);
      if (cp === 0 || cp === 0xfffd || control) continue;
      if (WHITE_SPACE.test(c)) {
        out += " ";
        continue;
      }
    }
    out += spec.handle_chinese_chars && isChinese(c.codePointAt(0)) ? ` ${c} ` : c;
  }
  const stripAccents = spec.strip_accents ?? spec.lowercase;
  if (stripAccents) out = out.normalize("NFD").replace(NONSPACING_MARK, "");
  return spec.lowercase ? lowercase(out) : out;
}

function normalizer(spec) {
  if (!spec) return (text) => text;
  switch (spec.type) {
    case "Sequence": {
      const steps = spec.normalizers.map(normalizer);
      return (text) => steps.reduce((t, step) => step(t), text);
    }
    case "NFKC":
    case "NFC":
    case "NFKD":
    case "NFD":
      return (text) => text.normalize(spec.type);
    case "Lowercase":
      return lowercase;
    case "BertNormalizer":
      return (text) => bertNormalize(text, spec);
    default:
      throw new Error(`tokenizer.json: normalizer ${spec.type} is not ported`);
  }
}

function isBertPunctuation(c) {
  return ASCII_PUNCTUATION.has(c) || PUNCTUATION.test(c);
}

function bertPreTokenize(text) {
  // Split on white space (dropped), then isolate every punctuation character.
  const words = [];
  let word = "";
  for (const c of text) {
    if (WHITE_SPACE.test(c) || isBertPunctuation(c)) {
      if (word) words.push(word);
      word = "";
      if (!WHITE_SPACE.test(c)) words.push(c);
    } else {
      word += c;
    }
  }
  if (word) words.push(word);
  return words;
}

function preTokenizer(spec) {
  if (!spec) return (text) => [text];
  if (spec.type === "BertPreTokenizer") return bertPreTokenize;
  throw new Error(`tokenizer.json: pre-tokenizer ${spec.type} is not ported`);
}

class BPE {
  constructor(spec) {
    if (spec.dropout || spec.byte_fallback || spec.fuse_unk || spec.ignore_merges) {
      throw new Error("tokenizer.json: BPE with dropout, byte fallback, fused unknowns or ignored merges is not ported");
    }
    this.vocab = new Map(Object.entries(spec.vocab));
    this.unk = spec.unk_token == null ? null : this.vocab.get(spec.unk_token);
    this.prefix = spec.continuing_subword_prefix || "";
    this.suffix = spec.end_of_word_suffix || "";
    this.ranks = new Map(); // "a b" (ids) -> [rank, id of the merged piece]
    spec.merges.forEach((merge, rank) => {
      const [a, b] = typeof merge === "string" ? merge.split(" ") : merge;
      const merged = this.vocab.get(a + b.slice(this.prefix.length));
      this.ranks.set(`${this.vocab.get(a)} ${this.vocab.get(b)}`, [rank, merged]);
    });
    this.cache = new Map();
  }

  tokenize(word) {
    let ids = this.cache.get(word);
    if (ids) return ids;
    const chars = Array.from(word);
    ids = [];
    chars.forEach((c, i) => {
      const piece = (i > 0 ? this.prefix : "") + c + (i === chars.length - 1 ? this.suffix : "");
      const id = this.vocab.get(piece);
      if (id !== undefined) ids.push(id);
      else if (this.unk !== null) ids.push(this.unk); // one [UNK] per unknown character
    });
    for (;;) { // merge the adjacent pair of lowest rank, the leftmost of equals, until none merges
      let best = null;
      for (let i = 0; i + 1 < ids.length; i++) {
        const merge = this.ranks.get(`${ids[i]} ${ids[i + 1]}`);
        if (merge && (best === null || merge[0] < best[1])) best = [i, merge[0], merge[1]];
      }
      if (best === null) break;
      ids.splice(best[0], 2, best[2]);
    }
    this.cache.set(word, ids);
    return ids;
  }
}

class WordPiece {
  constructor(spec) {
    this.vocab = new Map(Object.entries(spec.vocab));
    this.unk = this.vocab.get(spec.unk_token);
    this.prefix = spec.continuing_subword_prefix;
    this.maxChars = spec.max_input_chars_per_word;
  }

  tokenize(word) {
    // Greedy longest match first; a word with a piece outside the vocabulary is one [UNK].
    const chars = Array.from(word);
    if (chars.length > this.maxChars) return [this.unk];
    const ids = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let id;
      while (start < end) {
        const piece = (start > 0 ? this.prefix : "") + chars.slice(start, end).join("");
        id = this.vocab.get(piece);
        if (id !== undefined) break;
        end -= 1;
      }
      if (id === undefined) return [this.unk];
      ids.push(id);
      start = end;
    }
    return ids;
  }
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

export class Tokenizer {
  constructor(json) {
    if (json.post_processor || json.truncation || json.padding) {
      throw new Error("tokenizer.json: a post-processor, truncation or padding is not ported");
    }
    const model = json.model;
    if (model.type === "BPE") this.model = new BPE(model);
    else if (model.type === "WordPiece") this.model = new WordPiece(model);
    else throw new Error(`tokenizer.json: model ${model.type} is not ported`);
    this.kind = model.type === "WordPiece" ? "wordpiece" : "bpe";
    this.normalize = normalizer(json.normalizer);
    this.preTokenize = preTokenizer(json.pre_tokenizer);
    this.decoder = json.decoder;
    this.vocabulary = [];
    for (const [token, id] of Object.entries(model.vocab)) this.vocabulary[id] = token;
    this.added = new Map();
    for (const t of json.added_tokens || []) {
      if (t.normalized || t.single_word || t.lstrip || t.rstrip) {
        throw new Error(`tokenizer.json: added token ${t.content} with options is not ported`);
      }
      this.added.set(t.content, t);
      this.vocabulary[t.id] = t.content;
    }
    const contents = [...this.added.keys()].sort((a, b) => b.length - a.length);
    this.split = contents.length ? new RegExp(`(${contents.map(escapeRegExp).join("|")})`) : null;
    for (const name of ["PAD", "UNK", "CLS", "SEP", "MASK"]) {
      const t = this.added.get(`[${name}]`);
      this[`${name.toLowerCase()}Id`] = t ? t.id : undefined;
    }
  }

  static fromJSON(json) {
    return new Tokenizer(typeof json === "string" ? JSON.parse(json) : json);
  }

  get vocabSize() {
    return this.vocabulary.length;
  }

  /** Token ids of `text`, without special tokens around it (Python: tokenizer.encode). */
  encode(text) {
    const ids = [];
    const parts = this.split ? text.split(this.split) : [text];
    parts.forEach((part, i) => {
      if (i % 2 === 1) { // a special token, matched in the raw text
        ids.push(this.added.get(part).id);
        return;
      }
      for (const word of this.preTokenize(this.normalize(part))) ids.push(...this.model.tokenize(word));
    });
    return ids;
  }

  idToToken(id) {
    return this.vocabulary[id];
  }

  isSpecial(id) {
    const token = this.vocabulary[id];
    return this.added.has(token) && this.added.get(token).special;
  }

  /** The text of `ids`, special tokens left out (Python: tokenizer.decode). */
  decode(ids) {
    const tokens = ids.filter((id) => !this.isSpecial(id)).map((id) => this.vocabulary[id]);
    if (!tokens.length) return "";
    const d = this.decoder || {};
    if (d.type === "BPEDecoder") {
      return tokens.map((t, i) => t.split(d.suffix).join(i === tokens.length - 1 ? "" : " ")).join("");
    }
    if (d.type === "WordPiece") {
      const cleanup = (t) => t.replace(/ \./g, ".").replace(/ \?/g, "?").replace(/ !/g, "!").replace(/ ,/g, ",")
        .replace(/ ' /g, "'").replace(/ n't/g, "n't").replace(/ 'm/g, "'m").replace(/ do not/g, " don't")
        .replace(/ 's/g, "'s").replace(/ 've/g, "'ve").replace(/ 're/g, "'re");
      return tokens.map((t, i) => {
        const piece = i === 0 ? t : t.startsWith(d.prefix) ? t.slice(d.prefix.length) : ` ${t}`;
        return d.cleanup ? cleanup(piece) : piece;
      }).join("");
    }
    return tokens.join("");
  }
}
