/** A small live loss line for a board row: its own `job:<id>` subscription, drawn on a canvas. */
import { useEffect, useRef } from "preact/hooks";
import type { JobTopicData, MetricPoint, SnapshotSeries } from "../api/types";
import { MetricStore } from "../lib/series";
import { cssVar } from "../lib/theme";
import { useTopic } from "../live";
import { lossMetric } from "./MetricCharts";

const WIDTH = 120;
const HEIGHT = 28;

export function Sparkline({ jobId }: { jobId: number }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const store = useRef(new MetricStore(400)).current;
  const frame = useRef(0);

  const draw = () => {
    frame.current = 0;
    const el = canvas.current;
    const name = lossMetric(store.names());
    if (!el || !name) return;
    const [xs, ys] = store.data(name);
    const points = xs.map((x, i) => [x, ys?.[i]] as const).filter((p): p is readonly [number, number] => p[1] != null);
    el.dataset.points = String(points.length);
    const ctx = el.getContext("2d");
    if (!ctx || points.length < 2) return;
    const [x0, x1] = [points[0]![0], points.at(-1)![0]];
    const values = points.map((p) => p[1]);
    const [lo, hi] = [Math.min(...values), Math.max(...values)];
    ctx.clearRect(0, 0, WIDTH, HEIGHT);
    ctx.strokeStyle = cssVar("--accent");
    ctx.lineWidth = 1.25;
    ctx.beginPath();
    points.forEach(([x, y], i) => {
      const px = ((x - x0) / (x1 - x0 || 1)) * (WIDTH - 2) + 1;
      const py = HEIGHT - 2 - ((y - lo) / (hi - lo || 1)) * (HEIGHT - 4);
      if (i === 0) ctx.moveTo(px, py);
      else ctx.lineTo(px, py);
    });
    ctx.stroke();
    el.title = `${name}: ${values.at(-1)!.toPrecision(4)}`;
  };

  useEffect(() => () => cancelAnimationFrame(frame.current), []);
  useTopic(`job:${jobId}`, (message) => {
    const data = message.data as JobTopicData;
    if (!data.metrics) return;
    // Rank 0 stands for the job (ranks of a data-parallel job report nearly the same loss).
    const touched = Array.isArray(data.metrics)
      ? store.applyPoints((data.metrics as MetricPoint[]).filter((p) => p.rank === 0))
      : store.applySnapshot(rankZero(data.metrics as Record<string, SnapshotSeries>));
    if (touched.size && frame.current === 0) frame.current = requestAnimationFrame(draw);
  });
  return <canvas ref={canvas} class="sparkline" width={WIDTH} height={HEIGHT} data-testid={`sparkline-${jobId}`} aria-label="loss so far" />;
}

function rankZero(metrics: Record<string, SnapshotSeries>): Record<string, SnapshotSeries> {
  const out: Record<string, SnapshotSeries> = {};
  for (const [name, s] of Object.entries(metrics)) {
    const keep = s.step.map((_, i) => i).filter((i) => (s.rank?.[i] ?? 0) === 0);
    out[name] = { step: keep.map((i) => s.step[i]!), time: keep.map((i) => s.time[i]!), value: keep.map((i) => s.value[i]!), rank: keep.map(() => 0) };
  }
  return out;
}
