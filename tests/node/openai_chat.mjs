// Text through outrider's frontend with the official `openai` client:
// chat.completions.create streaming and not, and completions.create with a
// text prompt; prints what it read back as one JSON line:
//   node openai_chat.mjs <baseURL> <model>
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: [{ type: "text", text: "Hello, 世界!" }] },
];

const whole = await client.chat.completions.create({
  model, messages, max_tokens: 12,
});
let streamed = "";
let role = null;
let finish = null;
let chunks = 0;
let usage = null;
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 12, stream: true,
});
for await (const chunk of stream) {
  chunks += 1;
  const choice = chunk.choices[0];
  if (choice?.delta?.role) role = choice.delta.role;
  streamed += choice?.delta?.content ?? "";
  if (choice?.finish_reason) finish = choice.finish_reason;
  if (chunk.usage) usage = chunk.usage;
}
const text = await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 8,
});
console.log(JSON.stringify({
  whole: whole.choices[0].message.content,
  whole_role: whole.choices[0].message.role,
  whole_finish: whole.choices[0].finish_reason,
  whole_usage: whole.usage,
  streamed, role, finish, chunks, usage,
  text: text.choices[0].text,
  text_ids: text.choices[0].token_ids,
}));
