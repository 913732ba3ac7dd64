/**
 * Parallel coordinates: one vertical axis per setting and a last one for a metric, one line
 * per run in its colour. Numbers are placed on a linear (or, spanning a factor of 20 or
 * more, log) scale between their min and max; other values as evenly spaced categories.
 * It lays out what the server computed (settings, summaries); it computes no metric.
 */
import { formatMetric } from "../lib/format";

export interface Axis {
  label: string;
  /** One value per run (null/undefined: the run has none; its line skips the axis). */
  values: unknown[];
  /** A metric axis formats its ticks as the metric. */
  metric?: string;
}

interface Props {
  axes: Axis[];
  colors: string[];
  labels: string[];
  testId?: string;
}

const WIDTH = 960;
const HEIGHT = 300;
const PAD = { top: 24, bottom: 36, side: 70 };

type Scale = { at: (v: unknown) => number | null; ticks: { y: number; text: string }[] };

function scaleOf(axis: Axis): Scale {
  const top = PAD.top;
  const bottom = HEIGHT - PAD.bottom;
  const present = axis.values.filter((v) => v !== null && v !== undefined);
  const numbers = present.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  const show = (v: number) => (axis.metric ? formatMetric(axis.metric, v) : String(+v.toPrecision(4)));
  if (present.length > 0 && numbers.length === present.length) {
    const low = Math.min(...numbers);
    const high = Math.max(...numbers);
    const log = low > 0 && high / low >= 20;
    const f = (v: number) => (log ? Math.log(v) : v);
    const span = f(high) - f(low);
    const at = (v: unknown) => {
      if (typeof v !== "number" || !Number.isFinite(v)) return null;
      return span === 0 ? (top + bottom) / 2 : bottom - ((f(v) - f(low)) / span) * (bottom - top);
    };
    const ticks = span === 0 ? [{ y: at(low)!, text: show(low) }] : [{ y: bottom, text: show(low) }, { y: top, text: show(high) }];
    return { at, ticks };
  }
  const categories = [...new Set(present.map((v) => JSON.stringify(v)))].sort();
  const step = categories.length > 1 ? (bottom - top) / (categories.length - 1) : 0;
  const y = (i: number) => (categories.length > 1 ? bottom - i * step : (top + bottom) / 2);
  return {
    at: (v) => {
      const i = categories.indexOf(JSON.stringify(v));
      return i < 0 || v === null || v === undefined ? null : y(i);
    },
    ticks: categories.map((c, i) => ({ y: y(i), text: c.replace(/^"|"$/g, "") })),
  };
}

export function ParallelCoords({ axes, colors, labels, testId }: Props) {
  const scales = axes.map(scaleOf);
  const gap = axes.length > 1 ? (WIDTH - 2 * PAD.side) / (axes.length - 1) : 0;
  const x = (i: number) => (axes.length > 1 ? PAD.side + i * gap : WIDTH / 2);
  const runs = labels.length;
  return (
    <svg class="parallel" viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label="parallel coordinates" data-testid={testId} data-runs={runs}>
      {axes.map((axis, i) => (
        <g class="axis">
          <line x1={x(i)} x2={x(i)} y1={PAD.top} y2={HEIGHT - PAD.bottom} />
          <text class="axis-label" x={x(i)} y={HEIGHT - 10} text-anchor="middle">
            {axis.label}
          </text>
          {scales[i]!.ticks.map((t) => (
            <text class="tick" x={x(i) + 4} y={t.y + 4}>
              {t.text}
            </text>
          ))}
        </g>
      ))}
      {Array.from({ length: runs }, (_, run) => {
        const points = axes
          .map((axis, i) => {
            const y = scales[i]!.at(axis.values[run]);
            return y === null ? null : `${x(i).toFixed(1)},${y.toFixed(1)}`;
          })
          .filter((p): p is string => p !== null);
        return (
          <polyline points={points.join(" ")} fill="none" stroke={colors[run]} stroke-width="2" data-testid={testId ? `${testId}-line` : undefined}>
            <title>{labels[run]}</title>
          </polyline>
        );
      })}
    </svg>
  );
}
