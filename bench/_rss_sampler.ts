/**
 * Worker that samples the process's resident set size while the main thread
 * works. `Deno.memoryUsage().rss` is process-wide, and a worker keeps
 * sampling while the main thread is blocked in synchronous calls (FFI, sync
 * fs), which a timer on the main thread would miss. Private to `bench/`; see
 * `InProcessPeak` in `measure.ts`.
 *
 * Messages in: `{ type: "start", intervalMs }`, `{ type: "stop" }`.
 * Messages out: `{ type: "ready" }` once listening, `{ type: "peak", rssBytes }`
 * after each stop.
 *
 * @module
 */

/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />

let peak = 0;
let timer: ReturnType<typeof setInterval> | undefined;

function sample(): void {
  const rss = Deno.memoryUsage().rss;
  if (rss > peak) peak = rss;
}

self.onmessage = (event: MessageEvent<unknown>) => {
  const msg = event.data as { type?: unknown; intervalMs?: unknown };
  if (msg.type === "start") {
    clearInterval(timer);
    peak = 0;
    sample();
    timer = setInterval(sample, typeof msg.intervalMs === "number" ? msg.intervalMs : 2);
  } else if (msg.type === "stop") {
    clearInterval(timer);
    timer = undefined;
    sample();
    self.postMessage({ type: "peak", rssBytes: peak });
  }
};

self.postMessage({ type: "ready" });
