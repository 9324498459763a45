// "Try the models": the course models in the reader's browser, with no server and no kernel.
//
// Every element <div class="bertgpt-try" data-mode="MODE"></div> on a page becomes a widget, MODE
// being fill-mask, next-words, attention, or all (the three as tabs). book/_ext/try_models.py
// copies this file, the tokenizer port, onnxruntime-web (single-threaded wasm: no cross-origin
// isolation needed, so any static host serves it) and the ONNX exports of the course models into
// _static/try/ of the built book, and writes manifest.json there: the models each panel runs, as
// bertgpt.registry.WIDGET_MODES names them, and each model's file, tokenizer and shape. Nothing is
// fetched from anywhere else; before the reader first asks a model something, only the manifest.

import { Tokenizer } from "./tokenizer.js";
import { words } from "./words.js";

const BASE = new URL(".", import.meta.url);
const TOP = 5;
const SAY = words(); // the interface in the page's language (words.js)
const state = { manifest: null, ort: null, models: new Map(), queue: Promise.resolve(), timings: [] };
window.bertgptTry = state; // read by bench/browser_latency.py and the site test

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

async function manifest() {
  state.manifest ??= fetch(new URL("manifest.json", BASE)).then((r) => r.json());
  return state.manifest;
}

async function runtime() {
  state.ort ??= import(new URL("ort/ort.wasm.min.mjs", BASE).href).then((ort) => {
    ort.env.wasm.numThreads = 1; // one thread: no SharedArrayBuffer, so no special headers
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmPaths = new URL("ort/", BASE).href;
    ort.env.logLevel = "error";
    return ort;
  });
  return state.ort;
}

async function load(name) {
  if (!state.models.has(name)) {
    state.models.set(name, (async () => {
      const [info, ort] = await Promise.all([manifest(), runtime()]);
      const spec = info.models[name];
      const [session, json] = await Promise.all([
        ort.InferenceSession.create(new URL(spec.file, BASE).href, { executionProviders: ["wasm"] }),
        fetch(new URL(spec.tokenizer, BASE)).then((r) => r.json()),
      ]);
      return { name, spec, session, ort, tokenizer: Tokenizer.fromJSON(json) };
    })());
  }
  return state.models.get(name);
}

// One model call at a time, in order: logits (T x V) and attention (layers x heads x T x T).
function forward(model, ids) {
  const run = state.queue.then(async () => {
    const { ort, session } = model;
    const tensor = new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]);
    const start = performance.now();
    const out = await session.run({ ids: tensor });
    const ms = performance.now() - start;
    state.timings.push({ model: model.name, tokens: ids.length, ms });
    return { logits: out.logits.data, attention: out.attention.data, dims: out.attention.dims, ms };
  });
  state.queue = run.catch(() => {});
  return run;
}

function row(logits, position, vocab) {
  return logits.subarray(position * vocab, (position + 1) * vocab);
}

function softmax(values, temperature = 1) {
  let max = -Infinity;
  for (const v of values) max = Math.max(max, v / temperature);
  const out = new Float64Array(values.length);
  let sum = 0;
  values.forEach((v, i) => { out[i] = Math.exp(v / temperature - max); sum += out[i]; });
  return out.map((p) => p / sum);
}

function topK(probs, k) {
  const order = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a] || a - b);
  return order.slice(0, k).map((id) => ({ id, p: probs[id] }));
}

function shown(model, id) {
  const token = model.tokenizer.idToToken(id);
  if (model.tokenizer.kind !== "bpe" || model.tokenizer.isSpecial(id)) return token;
  return token.endsWith("</w>") ? token.slice(0, -4) : `${token}…`; // "…": the word goes on
}

function context(spec, ids) {
  return ids.slice(-spec.context);
}

// --- fill-mask: a BERT reads both sides of the blank, a GPT only the text before it ---------------

const BLANK = /_{3,}|\[MASK\]/g;

async function fillMask(text, [bertName, gptName]) {
  const blanks = text.match(BLANK) || [];
  if (blanks.length !== 1) throw new Error(SAY.oneBlank);
  const [bert, gpt] = await Promise.all([load(bertName), load(gptName)]);
  const masked = text.replace(BLANK, "[MASK]");
  const ids = [bert.tokenizer.clsId, ...bert.tokenizer.encode(masked), bert.tokenizer.sepId];
  if (ids.length > bert.spec.context) throw new Error(SAY.tooLong(bert.spec.context - 2));
  const before = masked.slice(0, masked.indexOf("[MASK]"));
  const prefix = context(gpt.spec, gpt.tokenizer.encode(before));
  const gptIds = prefix.length ? prefix : [gpt.tokenizer.sepId]; // as generate(): an empty text starts at [SEP]
  const answers = {};
  for (const [model, input, position] of [[bert, ids, ids.indexOf(bert.tokenizer.maskId)],
    [gpt, gptIds, gptIds.length - 1]]) {
    const out = await forward(model, input);
    const vocab = model.tokenizer.vocabSize;
    answers[model.name] = { top: topK(softmax(row(out.logits, position, vocab)), TOP), ms: out.ms, model };
  }
  return answers;
}

function candidates(list, answer, text) {
  list.replaceChildren(...answer.top.map(({ id, p, token }, rank) => el("li", { "data-id": id },
    el("span", { class: "bertgpt-rank" }, `${rank + 1}.`),
    el("span", { class: "bertgpt-token" }, token ?? shown(answer.model, id)),
    el("span", { class: "bertgpt-bar", style: `width: ${(100 * p).toFixed(1)}%` }),
    el("span", { class: "bertgpt-p" }, `${(100 * p).toFixed(1)}%`))));
  list.dataset.text = text;
  if (answer.ms !== undefined) list.dataset.ms = answer.ms.toFixed(1);
}

function fillMaskPanel(example, names) {
  const [bert, gpt] = names; // the bidirectional model, then the left-to-right one
  const input = el("input", { type: "text", class: "bertgpt-input", "aria-label": SAY.blankAria,
    value: example?.text ?? "The ___ has been ratified by the Senate." });
  const lists = {};
  const column = (name, title) => {
    lists[name] = el("ol", { class: "bertgpt-top5", "data-model": name });
    return el("div", { class: "bertgpt-column" }, el("h4", {}, title), lists[name]);
  };
  const status = el("p", { class: "bertgpt-status", role: "status" });
  const panel = el("div", { class: "bertgpt-panel", "data-panel": "fill-mask" },
    el("label", {}, ...SAY.typeBlank(el("code", {}, "___"), el("code", {}, "[MASK]"))),
    input,
    el("div", { class: "bertgpt-columns" },
      column(bert, SAY.bothSides(bert)),
      column(gpt, SAY.beforeOnly(gpt))),
    status);
  if (example) {
    for (const name of names) {
      candidates(lists[name], { top: example[name].map(([token, p, id]) => ({ id, p, token })) }, example.text);
    }
    status.textContent = SAY.builtExample;
  }
  const update = async () => {
    const text = input.value;
    status.textContent = state.models.size ? SAY.running : SAY.loading;
    try {
      const answers = await fillMask(text, names);
      if (input.value !== text) return; // the reader typed on: a newer answer comes
      for (const name of names) candidates(lists[name], answers[name], text);
      const first = text.search(BLANK) === 0 || !text.slice(0, text.search(BLANK)).trim();
      status.textContent = SAY.answered(bert, answers[bert].ms.toFixed(0), gpt, answers[gpt].ms.toFixed(0)) +
        (first ? SAY.nothingBefore(gpt) : "");
    } catch (error) {
      status.textContent = error.message;
    }
  };
  input.addEventListener("input", debounce(update));
  return panel;
}

// --- next words: a GPT continues the text, one sampled token at a time ----------------------------

function sample(probs) {
  let r = Math.random();
  for (let i = 0; i < probs.length; i++) {
    r -= probs[i];
    if (r <= 0) return i;
  }
  return probs.length - 1;
}

function nextToken(values, temperature, k) {
  if (temperature === 0) return topK(values, 1)[0].id;
  const kept = new Set(topK(values, k).map(({ id }) => id));
  const masked = Float32Array.from(values, (v, i) => (kept.has(i) ? v : -Infinity));
  return sample(softmax(masked, temperature));
}

function slider(label, attrs, format) {
  const input = el("input", { type: "range", ...attrs });
  const value = el("output", {}, format(input.value));
  input.addEventListener("input", () => { value.textContent = format(input.value); });
  return [input, el("label", { class: "bertgpt-slider" }, `${label} `, input, " ", value)];
}

function nextWordsPanel(example, [writer]) {
  const input = el("textarea", { class: "bertgpt-input", rows: "2", "aria-label": SAY.continueAria });
  input.value = example?.prompt ?? "The state of the Union";
  const [temperature, temperatureLabel] = slider(SAY.temperature, { min: "0", max: "2", step: "0.1",
    value: String(example?.temperature ?? 0.8), "data-control": "temperature" }, (v) => Number(v).toFixed(1));
  const [topk, topkLabel] = slider("top-k", { min: "1", max: "50", step: "1", value: String(example?.top_k ?? 20),
    "data-control": "top-k" }, (v) => v);
  const output = el("p", { class: "bertgpt-continuation" });
  const status = el("p", { class: "bertgpt-status", role: "status" });
  const button = el("button", { type: "button", class: "bertgpt-button" }, SAY.continueButton);
  if (example) {
    output.replaceChildren(el("span", {}, example.prompt), el("mark", {}, example.sample));
    status.textContent = SAY.oneSample(example.temperature, example.top_k);
  }
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = state.models.has(writer) ? SAY.writing : SAY.loadingOne(writer);
    try {
      const gpt = await load(writer);
      const prompt = input.value;
      const start = gpt.tokenizer.encode(prompt);
      let ids = start.length ? start : [gpt.tokenizer.sepId];
      const added = [];
      const mark = el("mark");
      output.replaceChildren(el("span", {}, prompt), mark);
      for (let i = 0; i < 24; i++) {
        const window = context(gpt.spec, ids);
        const out = await forward(gpt, window);
        const logits = row(out.logits, window.length - 1, gpt.tokenizer.vocabSize);
        const id = nextToken(logits, Number(temperature.value), Number(topk.value));
        ids = [...ids, id];
        added.push(id);
        mark.textContent = ` ${gpt.tokenizer.decode(added)}`;
      }
      output.dataset.text = prompt;
      status.textContent = SAY.eachPress;
    } catch (error) {
      status.textContent = error.message;
    } finally {
      button.disabled = false;
    }
  });
  return el("div", { class: "bertgpt-panel", "data-panel": "next-words" },
    el("label", {}, SAY.typeStart), input,
    el("div", { class: "bertgpt-controls" }, temperatureLabel, topkLabel, button), output, status);
}

// --- attention: one layer and head, the causal model beside the bidirectional one -----------------

function heatmap(canvas, weights, labels, caption) {
  const n = labels.length;
  const width = Math.min(canvas.parentElement.clientWidth || 360, 420);
  const margin = n <= 40 ? 70 : 8;
  const cell = (width - margin) / n;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = width * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${width}px`;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  const ink = getComputedStyle(canvas).color;
  g.fillStyle = ink;
  g.globalAlpha = 0.06;
  g.fillRect(margin, margin, n * cell, n * cell);
  g.globalAlpha = 1;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      g.fillStyle = `rgba(37, 99, 235, ${Math.min(1, weights[i * n + j] / 0.5)})`; // darkest at 0.5
      g.fillRect(margin + j * cell, margin + i * cell, Math.ceil(cell), Math.ceil(cell));
    }
  }
  if (margin > 8) {
    g.fillStyle = ink;
    g.font = `${Math.min(12, Math.max(8, cell * 0.8))}px sans-serif`;
    g.textAlign = "right";
    g.textBaseline = "middle";
    labels.forEach((label, i) => g.fillText(label.slice(0, 10), margin - 4, margin + (i + 0.5) * cell));
    labels.forEach((label, j) => {
      g.save();
      g.translate(margin + (j + 0.5) * cell, margin - 4);
      g.rotate(-Math.PI / 2);
      g.textAlign = "left";
      g.fillText(label.slice(0, 10), 0, 0);
      g.restore();
    });
  }
  canvas.onmousemove = (event) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left - margin) / cell);
    const i = Math.floor((event.clientY - box.top - margin) / cell);
    if (i >= 0 && j >= 0 && i < n && j < n) {
      caption.textContent = SAY.reads(labels[i], labels[j], weights[i * n + j].toFixed(2));
    }
  };
}

function attentionPanel(example, [causal, bidirectional]) {
  const input = el("input", { type: "text", class: "bertgpt-input", "aria-label": SAY.sentenceAria,
    value: example?.text ?? "The state of the Union is strong." });
  const layer = el("select", { "aria-label": SAY.layerAria, "data-control": "layer" });
  const head = el("select", { "aria-label": SAY.headAria, "data-control": "head" });
  for (let i = 0; i < (example?.n_layer ?? 4); i++) layer.append(el("option", { value: String(i) }, SAY.layer(i)));
  head.append(el("option", { value: "mean" }, SAY.meanHeads));
  for (let i = 0; i < (example?.n_head ?? 4); i++) head.append(el("option", { value: String(i) }, SAY.head(i)));
  const maps = {};
  const caption = el("p", { class: "bertgpt-status", role: "status" },
    SAY.typeThenPoint);
  const figure = (name, title) => {
    maps[name] = el("canvas", { class: "bertgpt-map", "data-model": name });
    return el("div", { class: "bertgpt-column" }, el("h4", {}, title), maps[name]);
  };
  const results = {};
  const draw = () => {
    const l = Number(layer.value);
    for (const [name, { weights, dims, labels }] of Object.entries(results)) {
      const [heads, n] = [dims[2], dims[3]]; // dims: 1, layers, heads, T, T
      const size = n * n;
      const pick = head.value === "mean" ? [...Array(heads).keys()] : [Number(head.value)];
      const w = new Float32Array(size);
      for (const h of pick) {
        const offset = (l * heads + h) * size;
        for (let k = 0; k < size; k++) w[k] += weights[offset + k] / pick.length;
      }
      heatmap(maps[name], w, labels, caption);
    }
  };
  const update = async () => {
    const text = input.value;
    caption.textContent = state.models.size ? SAY.running : SAY.loading;
    try {
      const models = await Promise.all([load(causal), load(bidirectional)]);
      for (const model of models) {
        const t = model.tokenizer;
        let ids = t.encode(text.replace(BLANK, "[MASK]"));
        if (!model.spec.causal) ids = [t.clsId, ...ids, t.sepId]; // BERT reads [CLS] text [SEP]
        ids = ids.slice(0, model.spec.context);
        const out = await forward(model, ids);
        results[model.name] = { weights: out.attention, dims: out.dims, labels: ids.map((id) => t.idToToken(id)) };
        maps[model.name].dataset.text = text;
      }
      if (input.value !== text) return;
      draw();
      caption.textContent = SAY.point;
    } catch (error) {
      caption.textContent = error.message;
    }
  };
  input.addEventListener("input", debounce(update));
  layer.addEventListener("change", draw);
  head.addEventListener("change", draw);
  const panel = el("div", { class: "bertgpt-panel", "data-panel": "attention" },
    el("label", {}, SAY.typeSentence), input,
    el("div", { class: "bertgpt-controls" }, layer, head,
      el("button", { type: "button", class: "bertgpt-button", onclick: update }, SAY.drawMaps)),
    el("div", { class: "bertgpt-columns" },
      figure(causal, SAY.leftOnly(causal)),
      figure(bidirectional, SAY.bothSidesMap(bidirectional))),
    caption);
  return panel;
}

// For bench/browser_latency.py: the time model `name` takes to answer `text` (read as the widget reads
// it: with [CLS] and [SEP] for a bidirectional model), tokenizing and ranking its top 5 included; the
// first call also loads the model.
state.answer = async (name, text) => {
  const start = performance.now();
  const model = await load(name);
  const t = model.tokenizer;
  let ids = t.encode(text.replace(BLANK, "[MASK]"));
  if (!model.spec.causal) ids = [t.clsId, ...ids, t.sepId];
  ids = context(model.spec, ids.length ? ids : [t.sepId]);
  const out = await forward(model, ids);
  const at = model.spec.causal ? ids.length - 1 : Math.max(0, ids.indexOf(t.maskId));
  const top = topK(softmax(row(out.logits, at, t.vocabSize)), TOP);
  return { ms: performance.now() - start, model: out.ms, tokens: ids.length, top: top.map(({ id }) => id) };
};

function debounce(action, ms = 250) {
  let timer;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(action, ms);
  };
}

const PANELS = { "fill-mask": fillMaskPanel, "next-words": nextWordsPanel, attention: attentionPanel };

async function mount(root) {
  const named = (await manifest()).modes; // the models each panel runs
  const mode = root.dataset.mode || "all";
  const modes = mode === "all" ? Object.keys(PANELS) : [mode];
  const exampleNode = root.querySelector("script.bertgpt-try-example");
  const examples = exampleNode ? JSON.parse(exampleNode.textContent) : {};
  const note = root.querySelector(".bertgpt-try-note");
  const panels = modes.map((m) => PANELS[m](examples[m], named[m]));
  const widget = el("div", { class: "bertgpt-widget" });
  if (panels.length > 1) {
    const tabs = el("div", { class: "bertgpt-tabs", role: "tablist" });
    modes.forEach((m, i) => {
      const tab = el("button", { type: "button", role: "tab", "data-tab": m, "aria-selected": String(i === 0) },
        SAY.tabs[m]);
      tab.addEventListener("click", () => {
        panels.forEach((p, j) => { p.hidden = j !== i; });
        tabs.querySelectorAll("button").forEach((b, j) => b.setAttribute("aria-selected", String(j === i)));
      });
      tabs.append(tab);
    });
    widget.append(tabs);
    panels.forEach((p, j) => { p.hidden = j !== 0; });
  }
  widget.append(...panels);
  root.replaceChildren(widget, ...(note ? [note] : []));
  root.dataset.ready = "true";
}

// Without the manifest the page keeps the example it was built with, and says why in the console.
document.querySelectorAll(".bertgpt-try").forEach((root) => mount(root).catch((error) => console.warn(error)));
