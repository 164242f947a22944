// stream.mjs streams N chat completions at once with the official OpenAI
// Node SDK from BASE_URL, their starts 20 ms apart, and prints one JSON
// line per request: its answer's id, the text it received, and its TTFT
// (from the SDK's fetch of the request to the first content delta, ms), as
// the SDK saw them. A round of N unmeasured requests first opens the SDK's
// connections and warms its code, as a long-running application's are.
import OpenAI from 'openai';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const [baseURL, n, model] = [process.argv[2], Number(process.argv[3] || 8), process.argv[4] || 'llama-3.1-8b'];
const sentAt = new Map(); // request body → the instant the SDK fetched it
const client = new OpenAI({
  baseURL,
  apiKey: process.env.SDKCHECK_KEY,
  maxRetries: 0,
  fetch: (url, init) => {
    sentAt.set(init.body, performance.now());
    return fetch(url, init);
  },
});

async function one(i, round) {
  await new Promise((r) => setTimeout(r, 20 * i));
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: `${round} ${i}: tell me about the sea` }],
    max_tokens: 32,
    stream: true,
    stream_options: { include_usage: true },
  });
  const body = [...sentAt.keys()].find((b) => b.includes(`"${round} ${i}:`));
  const t0 = sentAt.get(body);
  let text = '', id = '', ttft = null, usage = null;
  for await (const chunk of stream) {
    id = chunk.id || id;
    const d = chunk.choices?.[0]?.delta?.content;
    if (d) {
      if (ttft === null) ttft = performance.now() - t0;
      text += d;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  return { i, id, text, ttft_ms: ttft, completion_tokens: usage?.completion_tokens ?? null };
}

await Promise.all(Array.from({ length: n }, (_, i) => one(i, 'warm-up')));
// How late Node's event loop ran its callbacks while the measured requests
// streamed: the SDK's own share of its TTFT, beyond the wire's.
const lag = monitorEventLoopDelay({ resolution: 1 });
lag.enable();
const out = await Promise.all(Array.from({ length: n }, (_, i) => one(i, 'request')));
lag.disable();
for (const r of out) console.log(JSON.stringify(r));
console.log(JSON.stringify({ event_loop_delay_p99_ms: lag.percentile(99) / 1e6, event_loop_delay_max_ms: lag.max / 1e6 }));
