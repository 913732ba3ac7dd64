/**
 * Chart benchmark, run in a real browser by bench/run.py:
 *  1. one uPlot chart redrawn with 150,000 points (setData → the draw hook);
 *  2. 10 live job charts + 8 device charts through the app's own Chart component, fed points
 *     at a steady rate: time spent per animation frame in chart redraws, and long tasks.
 * Results go to window.__bench (and the page's <pre>).
 *
 * With `?first=raw` or `?first=app` the page measures only one first draw of 150,000 points, in
 * a fresh page (cold code, as a chart opening on a page is): `raw`, uPlot handed every point
 * (what part 1's `create_ms` times); `app`, the job page's way, the app's `Chart` over a
 * `MetricStore` holding 8 ranks × 18,750 steps, drawing its per-pixel min/max decimation
 * (what a job page open for a while draws when a chart is built again: a setting changed).
 * The app's draw reports its phases (ms after the render: the decimation's start and end, uPlot's
 * init hook, its axes and series drawn, ready) and the app's idle warm-up of the chart code before
 * it (`warm_up_ms`). `&idle=MS` waits MS ms between filling the store and mounting the chart (a
 * job page waiting for its snapshot: the warm-up runs then); `&again=N` draws N more charts in
 * the same page, each over a fresh store (warm code: the floor a warm-up could reach).
 * `?first=app&profile` wraps that draw in console.profile (a CDP client reads the profile);
 * `?pixels` draws 150,000 points raw and decimated and counts the canvas pixels that differ.
 * `?first=page&metrics=N` (6 by default) mounts a job page's metric charts, N of them over
 * 8 ranks × 18,750 steps each, and times the first paint (`pageFirstPaint`).
 */
import { render } from "preact";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "../src/styles.css";
import { Chart, lossOptions } from "../src/components/Chart";
import { MetricCharts } from "../src/components/MetricCharts";
import { decimate } from "../src/lib/decimate";
import { MetricStore, DeviceStore, type AlignedData } from "../src/lib/series";
import { Signal } from "../src/live";

const out = document.getElementById("out")!;
const host = document.getElementById("charts")!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const frame = () => new Promise<number>((r) => requestAnimationFrame(r));

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return { n: samples.length, mean: +mean.toFixed(2), p50: +at(0.5).toFixed(2), p95: +at(0.95).toFixed(2), max: +sorted.at(-1)!.toFixed(2) };
}

async function bigChart(points: number, repeats: number) {
  const xs = Array.from({ length: points }, (_, i) => i);
  const ys = (phase: number) => xs.map((x) => Math.exp(-x / 40_000) + 0.05 * Math.sin(x / 50 + phase) + 0.02 * Math.random());
  const el = document.createElement("div");
  host.appendChild(el);
  let drawnAt = 0;
  const t0 = performance.now();
  const plot = new uPlot(
    {
      width: 1200,
      height: 300,
      scales: { x: { time: false } },
      series: [{}, { stroke: "#2563eb", width: 1.5, points: { show: false } }],
      hooks: { draw: [() => (drawnAt = performance.now())] },
    },
    [xs, ys(0)],
    el,
  );
  await Promise.resolve();
  await sleep(0);
  const create = drawnAt - t0;
  const redraws: number[] = [];
  for (let i = 0; i < repeats; i += 1) {
    const data: uPlot.AlignedData = [xs, ys(i)];
    await frame();
    const start = performance.now();
    plot.setData(data);
    // uPlot commits in a microtask; the draw hook stamps when the canvas is painted.
    await Promise.resolve();
    await sleep(0);
    if (drawnAt < start) throw new Error("the chart did not redraw");
    redraws.push(drawnAt - start);
  }
  plot.destroy();
  el.remove();
  return { points, create_ms: +create.toFixed(2), ...(repeats > 0 ? { redraw_ms: stats(redraws) } : {}) };
}

/** The app's first draw of a metric chart over a store holding `ranks` × `steps` points: ms from mounting to uPlot's draw hook. */
async function appFirstDraw(ranks: number, steps: number) {
  const store = new MetricStore(steps);
  const marks: Record<string, number> = {};
  for (let step = 0; step < steps; step += 1)
    for (let rank = 0; rank < ranks; rank += 1) store.add("loss", rank, step, Math.exp(-step / 40_000) + 0.05 * Math.sin(step / 50 + rank) + 0.02 * Math.random(), 1.7e9 + step);
  const signal = new Signal<Set<string>>();
  const el = document.createElement("div");
  el.style.width = "1200px";
  host.appendChild(el);
  await sleep(0);
  // ?idle=MS: the page idles that long before the chart mounts (the snapshot's fetch on a job page)
  const idle = Number(new URLSearchParams(location.search).get("idle") ?? 0);
  if (idle > 0) await sleep(idle);
  let drawnAt = 0;
  // ?profile: a CPU profile of just this draw (a CDP client's Profiler.consoleProfileFinished)
  const profile = new URLSearchParams(location.search).has("profile");
  // console.profile/profileEnd: DevTools' own, not in TypeScript's DOM types
  const devtools = console as unknown as { profile(label: string): void; profileEnd(label: string): void };
  if (profile) devtools.profile("first draw");
  const t0 = performance.now();
  render(
    <Chart
      testId="first"
      title="loss"
      // the job page's loss chart by step (MetricCharts' metricOptions, the default view)
      options={(c) => ({
        ...lossOptions(c, ranks, {
          init: [() => (marks.init ||= performance.now())],
          ready: [() => (marks.ready ||= performance.now())],
          drawAxes: [() => (marks.axes ||= performance.now())],
          drawSeries: [() => (marks.series ||= performance.now())],
          draw: [() => (drawnAt ||= performance.now())],
        }),
        cursor: { sync: { key: "job-metrics" } },
      })}
      data={() => store.data("loss")}
      drawn={(px) => {
        marks.dec0 ||= performance.now();
        const d = store.drawn("loss", px);
        marks.dec1 ||= performance.now();
        return d;
      }}
      points={() => store.count("loss")}
      subscribe={(fn) => signal.on(fn)}
      countAttr="data-points"
      height={300}
    />,
    el,
  );
  while (!drawnAt) await sleep(0);
  if (profile) devtools.profileEnd("first draw");
  const ms = drawnAt - t0;
  const points = Number(el.querySelector('[data-testid="first"]')?.getAttribute("data-points"));
  render(null, el);
  el.remove();
  const phases = Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, +(v - t0).toFixed(1)]));
  // the app's idle warm-up (components/Chart.tsx: warmUp), when it ran before this draw
  const warmUps = performance.getEntriesByName("chart warm-up", "measure").map((e) => +e.duration.toFixed(1));
  return { points, first_draw_ms: +ms.toFixed(2), phases, warm_up_ms: warmUps };
}

/**
 * `?pixels`: the same 150,000 points (one noisy falling curve, or 8 ranks × 18,750 steps) drawn
 * twice by uPlot, every point and the chart's decimation (lib/decimate.ts), and their canvases
 * compared pixel by pixel: a pixel the raw curve inks (alpha ≥ 64) that the decimated one leaves
 * blank (alpha < 16) is one a reader would miss; and the other way round.
 */
async function pixelCompare(ranks: number, steps: number) {
  const xs = Array.from({ length: steps }, (_, i) => i);
  const raw: AlignedData = [xs, ...Array.from({ length: ranks }, (_, r) => xs.map((x) => Math.exp(-x / 40_000) + 0.05 * Math.sin(x / 50 + r) + 0.02 * Math.random()))];
  const draw = async (data: AlignedData) => {
    const el = document.createElement("div");
    host.appendChild(el);
    const plot = new uPlot(
      {
        width: 1200,
        height: 300,
        scales: { x: { time: false } },
        legend: { show: false },
        cursor: { show: false },
        series: [{}, ...raw.slice(1).map(() => ({ stroke: "#000000", width: 1, points: { show: false } }))],
      },
      data as uPlot.AlignedData,
      el,
    );
    await sleep(0); // uPlot draws in a microtask
    const pixels = plot.ctx.getImageData(0, 0, plot.ctx.canvas.width, plot.ctx.canvas.height).data;
    plot.destroy();
    el.remove();
    return pixels;
  };
  const drawn = decimate(raw, 1200);
  const a = await draw(raw);
  const b = await draw(drawn);
  let inked = 0;
  let missed = 0;
  let added = 0;
  let differ = 0;
  for (let i = 3; i < a.length; i += 4) {
    if (a[i]! >= 64) inked += 1;
    if (a[i]! >= 64 && b[i]! < 16) missed += 1;
    if (b[i]! >= 64 && a[i]! < 16) added += 1;
    if (Math.abs(a[i]! - b[i]!) >= 64) differ += 1;
  }
  return { ranks, steps, rows_drawn: drawn[0].length, pixels_inked_by_raw: inked, missed, added, alpha_differs_by_64: differ };
}

async function liveCharts(jobs: number, devices: number, seconds: number, pointsPerSecond: number) {
  const stores = Array.from({ length: jobs }, () => new MetricStore());
  const signals = stores.map(() => new Signal<Set<string>>());
  const deviceStore = new DeviceStore();
  const deviceSignal = new Signal<Set<string>>();
  // Time every animation-frame callback (the charts' redraws run in them).
  const frameWork: number[] = [];
  let pending = 0;
  const nativeRaf = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (cb) =>
    nativeRaf((t) => {
      const s = performance.now();
      cb(t);
      pending += performance.now() - s;
    });
  const longTasks: number[] = [];
  const observer = new PerformanceObserver((list) => list.getEntries().forEach((e) => longTasks.push(e.duration)));
  try {
    observer.observe({ type: "longtask", buffered: false });
  } catch {
    /* not supported */
  }
  render(
    <div class="metric-charts">
      {stores.map((store, i) => (
        <Chart
          testId={`bench-${i}`}
          title={`job ${i} loss`}
          options={() => ({ scales: { x: { time: false } }, series: [{}, { stroke: "#2563eb" }, { stroke: "#dc2626" }] })}
          data={() => store.data("loss")}
          subscribe={(fn) => signals[i]!.on(fn)}
          countAttr="data-points"
        />
      ))}
      {Array.from({ length: devices }, (_, d) => (
        <Chart
          testId={`bench-dev-${d}`}
          title={`device ${d}`}
          options={() => ({ scales: { x: { time: true } }, series: [{}, { stroke: "#16a34a" }, { stroke: "#9333ea" }] })}
          data={() => deviceStore.data("n", d)}
          subscribe={(fn) => deviceSignal.on((keys) => keys.has(`n\u0000${d}`) && fn())}
          countAttr="data-samples"
          height={160}
        />
      ))}
    </div>,
    host,
  );
  // Warm-up history: every job chart starts with 2 ranks x 5,000 steps.
  stores.forEach((store, i) => {
    for (let step = 0; step < 5_000; step += 1) for (const rank of [0, 1]) store.add("loss", rank, step, 1 / (step + 1));
    signals[i]!.emit(new Set(["loss"]));
  });
  await sleep(500);
  let step = 5_000;
  const tickMs = 50;
  const perTick = Math.max(1, Math.round((pointsPerSecond * tickMs) / 1000 / 2));
  let now = Date.now() / 1000;
  const feed = setInterval(() => {
    stores.forEach((store, i) => {
      for (let k = 0; k < perTick; k += 1) for (const rank of [0, 1]) store.add("loss", rank, step + k, 1 / (step + k + 1));
      signals[i]!.emit(new Set(["loss"]));
    });
    step += perTick;
    now += tickMs / 1000;
    const keys = deviceStore.apply(Array.from({ length: devices }, (_, d) => ({ node: "n", device: d, kind: "gpu", time: now, util: 50 + 40 * Math.sin(now + d), mem_used: 1e9 * (d + 1) })));
    deviceSignal.emit(keys);
  }, tickMs);
  const frameTimes: number[] = [];
  let last = await frame();
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const t = await frame();
    frameTimes.push(t - last);
    last = t;
    frameWork.push(pending);
    pending = 0;
  }
  clearInterval(feed);
  observer.disconnect();
  window.requestAnimationFrame = nativeRaf;
  const points = Number(document.querySelector('[data-testid="bench-0"]')?.getAttribute("data-points"));
  render(null, host);
  return {
    job_charts: jobs,
    device_charts: devices,
    points_per_chart_per_second: pointsPerSecond,
    points_in_each_job_chart_at_end: points,
    frame_interval_ms: stats(frameTimes),
    chart_work_per_frame_ms: stats(frameWork),
    long_tasks: longTasks.length,
  };
}

/**
 * A job page's first paint of its charts: the app's `MetricCharts` (the job page's component)
 * over a store of `metrics` metrics × `ranks` ranks × `steps` steps, mounted at once as a job
 * page mounts them when its snapshot arrives. `paint_ms`: from the render to the next animation
 * frame (the browser paints right after it: what a reader first sees); `in_view`: the charts
 * drawn by then, of those whose box starts inside the window; `all_ms`: until every chart drew.
 */
async function pageFirstPaint(metrics: number, ranks: number, steps: number) {
  const store = new MetricStore(steps);
  const names = ["loss", ...Array.from({ length: metrics - 1 }, (_, i) => `metric_${i + 1}`)];
  for (let step = 0; step < steps; step += 1)
    for (const [m, name] of names.entries())
      for (let rank = 0; rank < ranks; rank += 1) store.add(name, rank, step, Math.exp(-step / 40_000) + 0.05 * Math.sin(step / 50 + rank + m) + 0.02 * Math.random(), 1.7e9 + step);
  const el = document.createElement("div");
  el.style.width = "1280px";
  host.prepend(el); // at the top of the page, as a job page's charts are in its first screen
  out.style.display = "none";
  const idle = Number(new URLSearchParams(location.search).get("idle") ?? 0);
  await sleep(idle);
  const boxes = () => [...el.querySelectorAll<HTMLElement>(".chart-box")];
  const drawn = (box: HTMLElement) => box.querySelector("canvas") !== null;
  const t0 = performance.now();
  render(<MetricCharts store={store} changed={new Signal<Set<string>>()} names={names} />, el);
  await frame();
  const paint = performance.now() - t0;
  const inView = boxes().filter((b) => b.getBoundingClientRect().top < window.innerHeight);
  const inViewDrawn = inView.filter(drawn).length;
  while (!boxes().every(drawn)) await sleep(0);
  const all = performance.now() - t0;
  out.style.display = "";
  const warmUps = performance.getEntriesByName("chart warm-up", "measure").map((e) => +e.duration.toFixed(1));
  return { charts: boxes().length, in_view: `${inViewDrawn} of ${inView.length}`, first_draw_ms: +paint.toFixed(2), all_ms: +all.toFixed(2), warm_up_ms: warmUps };
}

async function main() {
  if (new URLSearchParams(location.search).has("pixels")) {
    const results = [await pixelCompare(1, 150_000), await pixelCompare(8, 18_750)];
    out.textContent = JSON.stringify(results, null, 2);
    (window as unknown as { __bench: unknown }).__bench = results;
    return;
  }
  const first = new URLSearchParams(location.search).get("first");
  if (first) {
    // one cold first draw of 150,000 points, the whole page for it (bench/run.py alternates them)
    const again = Number(new URLSearchParams(location.search).get("again") ?? 0);
    if (first === "app" && again) {
      const draws = [];
      for (let i = 0; i <= again; i += 1) draws.push(await appFirstDraw(8, 18_750));
      out.textContent = JSON.stringify(draws, null, 2);
      (window as unknown as { __bench: unknown }).__bench = { first_draw_ms: draws[0]!.first_draw_ms, draws };
      return;
    }
    const metrics = Number(new URLSearchParams(location.search).get("metrics") ?? 6);
    const results =
      first === "page"
        ? await pageFirstPaint(metrics, 8, 18_750)
        : first === "app"
          ? await appFirstDraw(8, 18_750)
          : { points: 150_000, first_draw_ms: (await bigChart(150_000, 0)).create_ms };
    out.textContent = JSON.stringify(results, null, 2);
    (window as unknown as { __bench: unknown }).__bench = results;
    return;
  }
  const results = {
    user_agent: navigator.userAgent,
    hardware_concurrency: navigator.hardwareConcurrency,
    big: await bigChart(150_000, 20),
    live: await liveCharts(10, 8, 10, 100),
  };
  out.textContent = JSON.stringify(results, null, 2);
  (window as unknown as { __bench: unknown }).__bench = results;
}

void main();
