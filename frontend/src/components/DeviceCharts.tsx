/**
 * One chart per device: utilization % (fixed 0–100) and memory in bytes; under it, for a
 * device that reports them (GPUs through NVML), temperature in °C and power in W. CPU slots
 * have no such sensors: their caption says so instead of drawing empty axes.
 */
import { useEffect, useState } from "preact/hooks";
import type uPlot from "uplot";
import type { Device } from "../api/types";
import { byteAxis } from "../lib/axes";
import { formatBytes } from "../lib/format";
import { sensed, withLive, type DeviceHistory } from "../lib/deviceHistory";
import { windowed } from "../lib/series";
import { deviceLabel } from "./bits";
import { axis, Chart, type ChartColors } from "./Chart";
import type { Cluster } from "../data";

const SYNC = { key: "job-devices" };

/** A number per history fetched: the charts are rebuilt when a newer one arrives (no sample may follow it). */
const historyIds = new WeakMap<DeviceHistory, number>();
let histories = 0;
function historyId(history: DeviceHistory | null): number {
  if (!history) return 0;
  if (!historyIds.has(history)) historyIds.set(history, (histories += 1));
  return historyIds.get(history)!;
}

function deviceOptions(kind: string | undefined, memoryTotal: number | null | undefined, shared: boolean) {
  const cpu = kind === "cpu";
  return (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: {
      x: { time: true },
      util: { range: [0, 100] },
      // A device's own memory is drawn against its capacity; a CPU slot's RSS against its own
      // peak (its "total" is the host's RAM, shared by the slots: memory_shared, which would
      // flatten the line). At least 1 KiB: an idle slot's 0-byte line gets a readable axis.
      mem: { range: (_u, _min, max) => [0, !shared && memoryTotal ? memoryTotal : Math.max(max * 1.1, 1024)] },
    },
    axes: [
      axis(c),
      axis(c, { scale: "util", label: cpu ? "CPU (%)" : "util (%)", values: (_u, ticks) => ticks.map((t) => `${t}%`) }),
      // each tick names its unit (512 MiB), so the label names none
      axis(c, byteAxis(cpu ? "RSS" : "memory used", { scale: "mem", side: 1, size: 92, grid: { show: false } })),
    ],
    series: [
      {},
      { label: cpu ? "CPU %" : "util %", scale: "util", stroke: c.series[0], width: 1.5, value: (_u, v) => (v == null ? "—" : `${v.toFixed(0)}%`) },
      { label: "memory", scale: "mem", stroke: c.series[1], width: 1.5, value: (_u, v) => formatBytes(v) },
    ],
    cursor: { sync: SYNC },
  });
}

function sensorOptions(c: ChartColors): Omit<uPlot.Options, "width" | "height"> {
  return {
    scales: {
      x: { time: true },
      temp: { range: (_u, min, max) => [Math.min(20, min ?? 20), Math.max(100, (max ?? 0) + 5)] },
      power: { range: (_u, _min, max) => [0, Math.max(50, (max ?? 0) * 1.1)] },
    },
    axes: [
      axis(c),
      axis(c, { scale: "temp", label: "temp (°C)", values: (_u, ticks) => ticks.map((t) => `${t}°C`) }),
      axis(c, { scale: "power", side: 1, size: 70, label: "power (W)", grid: { show: false }, values: (_u, ticks) => ticks.map((t) => `${t} W`) }),
    ],
    series: [
      {},
      { label: "temperature", scale: "temp", stroke: c.series[2], width: 1.5, value: (_u, v) => (v == null ? "—" : `${v.toFixed(0)} °C`) },
      { label: "power", scale: "power", stroke: c.series[3], width: 1.5, value: (_u, v) => (v == null ? "—" : `${v.toFixed(0)} W`) },
    ],
    cursor: { sync: SYNC },
  };
}

const NO_ROWS: (number | null)[][] = [[], [], []];

/** The live samples of a device: none once the history says no attempt of the job holds it now. */
function liveRows(history: DeviceHistory | null, key: string, rows: () => (number | null)[][]) {
  return (!history || history.live.has(key) ? rows() : NO_ROWS) as Parameters<typeof withLive>[2];
}

/** Samples drawn (the row of nulls between two attempts is none). */
function countSamples(data: (number | null)[][]): number {
  const [, util = [], mem = []] = data;
  let n = 0;
  for (let i = 0; i < util.length; i += 1) if (util[i] != null || mem[i] != null) n += 1;
  return n;
}

/** Samples with a temperature or power reading: what the sensor chart draws. */
function countReadings(data: (number | null)[][]): number {
  const [, temp = [], power = []] = data;
  let n = 0;
  for (let i = 0; i < temp.length; i += 1) if (temp[i] != null || power[i] != null) n += 1;
  return n;
}

interface Props {
  cluster: Cluster;
  node: string;
  devices: number[];
  /** Test id of each chart: `${testIdPrefix}${index}`; the sensor chart adds `-sensors`. */
  testIdPrefix?: string;
  height?: number;
  /** Unix seconds: draw only live samples from `since` to `until` (a job's own time on the devices). */
  since?: number | null;
  until?: number | null;
  /** The job's stored samples of every attempt (drawn before the live ones, from the job's start). */
  history?: DeviceHistory | null;
}

export function DeviceCharts({ cluster, node, devices, testIdPrefix = "device-chart-", height = 160, since = null, until = null, history = null }: Props) {
  const known = new Map<number, Device>(
    (cluster.nodes?.find((n) => n.name === node)?.devices ?? []).map((d) => [d.index, d]),
  );
  return (
    <div class="device-charts">
      {devices.map((index) => {
        const device = known.get(index);
        const key = `${node}\u0000${index}`;
        const kind = device?.kind ?? cluster.store.latest(node, index)?.kind ?? history?.kinds.get(key);
        const label = deviceLabel(kind, index);
        const named = device?.name && device.name !== label ? ` — ${device.name}` : "";
        const shared = device?.memory_shared ?? kind === "cpu";
        const total = device?.memory_total ?? cluster.store.latest(node, index)?.mem_total;
        const note = kind === "cpu" ? " · no temperature or power sensors" : "";
        // the host's RAM is not the slot's own: say whose it is instead of drawing it as a capacity
        const memory = shared && total ? ` · RSS of the host's ${formatBytes(total)} RAM, shared by its CPU slots` : "";
        return (
          <div class="device-chart-group" key={`${node}:${index}:${kind}:${historyId(history)}`}>
            <Chart
              testId={`${testIdPrefix}${index}`}
              title={`${label}${named} on ${node}${note}${memory}`}
              options={deviceOptions(kind, total, shared)}
              data={() => withLive(history?.columns.get(key), [1, 2], liveRows(history, key, () => windowed(cluster.store.data(node, index), since, until)), history?.liveSince ?? null)}
              subscribe={(fn) => cluster.changed.on((keys) => keys.has(key) && fn())}
              countAttr="data-samples"
              count={countSamples}
              height={height}
            />
            {kind !== "cpu" && (
              <DeviceSensors cluster={cluster} node={node} index={index} label={label} testId={`${testIdPrefix}${index}-sensors`} height={height} since={since} until={until} history={history} />
            )}
          </div>
        );
      })}
    </div>
  );
}

/** Temperature and power of a device, drawn once it has reported either (a GPU without NVML readings says so). */
function DeviceSensors({ cluster, node, index, label, testId, height, since, until, history }: { cluster: Cluster; node: string; index: number; label: string; testId: string; height: number; since: number | null; until: number | null; history: DeviceHistory | null }) {
  const key = `${node}\u0000${index}`;
  const [sensing, setSensing] = useState(() => cluster.store.hasSensors(node, index) || sensed(history, key));
  useEffect(() => {
    if (sensing) return;
    if (cluster.store.hasSensors(node, index) || sensed(history, key)) {
      setSensing(true);
      return;
    }
    return cluster.changed.on((keys) => {
      if (keys.has(key) && cluster.store.hasSensors(node, index)) setSensing(true);
    });
  }, [cluster, key, sensing, history]);
  if (!sensing) {
    return (
      <p class="muted small device-sensors-note" data-testid={`${testId}-none`}>
        {label} has reported no temperature or power yet.
      </p>
    );
  }
  return (
    <Chart
      testId={testId}
      title={`${label} on ${node}: temperature and power`}
      options={sensorOptions}
      data={() => withLive(history?.columns.get(key), [3, 4], liveRows(history, key, () => windowed(cluster.store.sensors(node, index), since, until)), history?.liveSince ?? null)}
      subscribe={(fn) => cluster.changed.on((keys) => keys.has(key) && fn())}
      countAttr="data-samples"
      count={countReadings}
      height={height}
    />
  );
}
