/** A small live loss line for a board row: its own `job:<id>` subscription, drawn on a canvas. */
import { useEffect, useRef } from "preact/hooks";
import type { JobTopicData, MetricPoint, SnapshotSeries } from "../api/types";
import { MetricStore, ofRank } from "../lib/series";
import { cssVar } from "../lib/theme";
import { useTopic } from "../live";
import { lossMetric } from "./MetricCharts";

const WIDTH = 120;
const HEIGHT = 28;

/**
 * `rank`: the rank whose loss stands for the job, as the server says (`JobOut.loss_rank`):
 * 0, or for a pipeline the first rank of its last stage (the only stage that computes the loss).
 */
export function Sparkline({ jobId, rank }: { jobId: number; rank: number }) {
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
    const touched = Array.isArray(data.metrics)
      ? store.applyPoints((data.metrics as MetricPoint[]).filter((p) => p.rank === rank))
      : store.applySnapshot(ofRank(data.metrics as Record<string, SnapshotSeries>, rank));
    if (touched.size && frame.current === 0) frame.current = requestAnimationFrame(draw);
  });
  return <canvas ref={canvas} class="sparkline" width={WIDTH} height={HEIGHT} data-testid={`sparkline-${jobId}`} data-rank={rank} aria-label="loss so far" />;
}
