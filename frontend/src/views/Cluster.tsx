/** Nodes and their devices with the latest utilization and memory, live from `cluster`. */
import { useMemo } from "preact/hooks";
import { deviceLabel } from "../components/bits";
import { useCluster } from "../components/ClusterSummary";
import { formatBytes, formatTime } from "../lib/format";
import { busyDevices } from "../lib/stores";
import { Link } from "../router";
import { useJobs } from "./Board";

export function ClusterView() {
  const cluster = useCluster();
  const jobs = useJobs();
  const busy = useMemo(() => busyDevices(jobs?.values() ?? []), [jobs]);

  if (!cluster.nodes) return <p class="muted">Loading cluster…</p>;
  return (
    <section>
      <h1>Cluster</h1>
      {cluster.nodes.length === 0 && <p class="empty">No worker nodes have registered yet.</p>}
      {cluster.nodes.map((node) => (
        <div class="panel node" data-testid={`node-${node.name}`}>
          <h2>
            {node.name} <span class={`badge node-${node.state}`}>{node.state}</span>
            {node.drained && <span class="badge">drained</span>}
          </h2>
          <p class="muted small">
            {node.hostname} · {node.address} · last heartbeat {formatTime(node.last_heartbeat)}
          </p>
          <table>
            <thead>
              <tr>
                <th scope="col">Device</th>
                <th scope="col">Name</th>
                <th scope="col">Utilization</th>
                <th scope="col">Memory</th>
                <th scope="col">Temp / power</th>
                <th scope="col">Job</th>
                <th scope="col">Sampled</th>
              </tr>
            </thead>
            <tbody>
              {node.devices.map((device) => {
                const sample = cluster.store.latest(node.name, device.index);
                const job = device.job_id ?? busy.get(node.name)?.get(device.index);
                const total = sample?.mem_total ?? device.memory_total;
                return (
                  <tr data-testid={`device-row-${node.name}-${device.index}`}>
                    <td>{deviceLabel(device.kind, device.index)}</td>
                    <td>{device.name}</td>
                    <td>
                      <Meter percent={sample?.util} />
                    </td>
                    <td>
                      {formatBytes(sample?.mem_used)}
                      {total ? ` / ${formatBytes(total)}` : ""}
                    </td>
                    <td>
                      {sample?.temperature != null ? `${sample.temperature.toFixed(0)} °C` : "—"}
                      {" / "}
                      {sample?.power != null ? `${sample.power.toFixed(0)} W` : "—"}
                    </td>
                    <td>{job === undefined ? <span class="muted">free</span> : <Link href={`/jobs/${job}`}>#{job}</Link>}</td>
                    <td>{formatTime(sample?.time, false)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ))}
    </section>
  );
}

function Meter({ percent }: { percent: number | null | undefined }) {
  if (percent == null) return <span class="muted">—</span>;
  const clamped = Math.max(0, Math.min(100, percent));
  return (
    <span class="progress" title={`${percent.toFixed(0)}%`}>
      <span class="progress-bar" aria-hidden="true">
        <span style={{ width: `${clamped}%` }} />
      </span>
      <span class="progress-text">{percent.toFixed(0)}%</span>
    </span>
  );
}
