// Drives keel's /v1/chat/completions with the official openai package, as
// any client of an OpenAI-compatible server would: lists the models, asks
// without streaming, then streams the next turn of the same conversation.
// Usage: node openai_client.mjs BASE_URL API_KEY
// Prints one JSON line with what it saw; exits 1 on any error.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);

const conversation = `npm-${process.pid}`;
const first = await client.chat.completions.create({
  model: 'payer',
  user: conversation,
  messages: [{ role: 'user', content: 'how do I file an appeal' }],
});

const stream = await client.chat.completions.create({
  model: 'payer',
  user: conversation,
  stream: true,
  messages: [{ role: 'user', content: 'Sunshine' }],
});
let text = '';
let chunks = 0;
let finish = null;
for await (const chunk of stream) {
  chunks++;
  text += chunk.choices[0]?.delta?.content ?? '';
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
}

console.log(JSON.stringify({
  models: ids,
  first: { object: first.object, content: first.choices[0].message.content,
           finish: first.choices[0].finish_reason, conversation: first.keel?.conversation_id },
  streamed: { chunks, finish, text },
}));
