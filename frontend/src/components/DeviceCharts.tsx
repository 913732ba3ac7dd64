/** One chart per device of a job: utilization % (fixed 0–100) and memory in bytes. */
import type uPlot from "uplot";
import type { Device } from "../api/types";
import { formatBytes } from "../lib/format";
import { deviceLabel } from "./bits";
import { axis, Chart, type ChartColors } from "./Chart";
import type { Cluster } from "./ClusterSummary";

function deviceOptions(kind: string | undefined, memoryTotal: number | null | undefined) {
  const cpu = kind === "cpu";
  return (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: {
      x: { time: true },
      util: { range: [0, 100] },
      // A GPU's memory is drawn against its capacity; a CPU slot's RSS against its own peak
      // (the "total" of a CPU slot is the whole host's memory, which would flatten the line).
      mem: { range: (_u, _min, max) => [0, !cpu && memoryTotal ? memoryTotal : Math.max(max * 1.1, 1)] },
    },
    axes: [
      axis(c),
      axis(c, { scale: "util", label: cpu ? "process CPU %" : "utilization %", values: (_u, ticks) => ticks.map((t) => `${t}%`) }),
      axis(c, {
        scale: "mem",
        side: 1,
        size: 72,
        label: cpu ? "process RSS" : "memory used",
        grid: { show: false },
        values: (_u, ticks) => ticks.map((t) => formatBytes(t)),
      }),
    ],
    series: [
      {},
      { label: cpu ? "CPU %" : "util %", scale: "util", stroke: c.series[0], width: 1.5, value: (_u, v) => (v == null ? "—" : `${v.toFixed(0)}%`) },
      { label: "memory", scale: "mem", stroke: c.series[1], width: 1.5, value: (_u, v) => formatBytes(v) },
    ],
    cursor: { sync: { key: "job-devices" } },
  });
}

interface Props {
  cluster: Cluster;
  node: string;
  devices: number[];
  /** Test id of each chart: `${testIdPrefix}${index}`. */
  testIdPrefix?: string;
  height?: number;
}

export function DeviceCharts({ cluster, node, devices, testIdPrefix = "device-chart-", height = 160 }: Props) {
  const known = new Map<number, Device>(
    (cluster.nodes?.find((n) => n.name === node)?.devices ?? []).map((d) => [d.index, d]),
  );
  return (
    <div class="device-charts">
      {devices.map((index) => {
        const device = known.get(index);
        const kind = device?.kind ?? cluster.store.latest(node, index)?.kind;
        const key = `${node}\u0000${index}`;
        const label = deviceLabel(kind, index);
        const named = device?.name && device.name !== label ? ` — ${device.name}` : "";
        return (
          <Chart
            key={`${node}:${index}:${kind}`}
            testId={`${testIdPrefix}${index}`}
            title={`${label}${named} on ${node}`}
            options={deviceOptions(kind, device?.memory_total ?? cluster.store.latest(node, index)?.mem_total)}
            data={() => cluster.store.data(node, index)}
            subscribe={(fn) => cluster.changed.on((keys) => keys.has(key) && fn())}
            countAttr="data-samples"
            count={(data) => data[0].length}
            height={height}
          />
        );
      })}
    </div>
  );
}
