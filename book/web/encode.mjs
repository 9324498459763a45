// node book/web/encode.mjs TOKENIZER_JSON < texts.json: the ids of each text, as JSON, one list per text.
// tests/test_tokenizer_js.py runs it to compare the JavaScript tokenizer with Python's.
import { readFileSync } from "node:fs";
import { Tokenizer } from "./src/tokenizer.js";

const tokenizer = Tokenizer.fromJSON(readFileSync(process.argv[2], "utf8"));
const texts = JSON.parse(readFileSync(0, "utf8"));
const decode = process.argv[3] === "--decode";
process.stdout.write(JSON.stringify(texts.map((t) => (decode ? tokenizer.decode(t) : tokenizer.encode(t)))));
