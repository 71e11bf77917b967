// Streams a completion from outrider's frontend with the official `openai`
// client and prints what it saw as one JSON line:
//   node openai_stream.mjs <baseURL> <model> <max_tokens> <token ids...>
import OpenAI from "openai";

const [baseURL, model, maxTokens, ...prompt] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
const tokens = [];
let finish = null;
let chunks = 0;
const stream = await client.completions.create({
  model,
  prompt: prompt.map(Number),
  max_tokens: Number(maxTokens),
  stream: true,
});
for await (const chunk of stream) {
  chunks += 1;
  const choice = chunk.choices[0];
  for (const t of choice.token_ids ?? []) tokens.push(t);
  if (choice.finish_reason) finish = choice.finish_reason;
}
// The non-streaming call, and an error the client must surface.
const whole = await client.completions.create({
  model, prompt: prompt.map(Number), max_tokens: Number(maxTokens),
});
let errorStatus = null;
try {
  await client.completions.create({ model: "no-such-model", prompt: [1], max_tokens: 1 });
} catch (e) {
  errorStatus = e.status;
}
console.log(JSON.stringify({
  tokens, finish, chunks,
  whole: whole.choices[0].token_ids, usage: whole.usage, errorStatus,
}));
