/** Nodes, their health and devices (who holds each), live charts per device; drain for admins. */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Me, Node } from "../api/types";
import { deviceLabel, TableHead, ViewHead } from "../components/bits";
import { useCluster } from "../data";
import { DeviceCharts } from "../components/DeviceCharts";
import { formatBytes, formatTime } from "../lib/format";
import { capacity, managerSummary, type ManagerView } from "../lib/manager";
import { stragglerBadge, stragglerTitle } from "../lib/stragglers";
import { Link } from "../router";

export function ClusterView({ me }: { me: Me }) {
  const cluster = useCluster();
  const [charts, setCharts] = useState(true);

  if (!cluster.nodes) return <p class="muted">Loading cluster…</p>;
  return (
    <section>
      <ViewHead title="Cluster">
        <label class="inline">
          <input type="checkbox" checked={charts} onChange={(e) => setCharts(e.currentTarget.checked)} /> live charts
        </label>
      </ViewHead>
      <ManagerNodes />
      {cluster.nodes.length === 0 && <p class="empty">No worker nodes have registered yet.</p>}
      {cluster.nodes.map((node) => (
        <div class="panel node" data-testid={`node-${node.name}`}>
          <h2>
            {node.name} <span class={`badge node-${node.state}`}>{node.state}</span>
            {node.drained && (
              <span class="badge" data-testid={`drained-${node.name}`}>
                drained
              </span>
            )}
            {node.disk?.low && (
              <span class="badge disk-low" data-testid={`disk-low-${node.name}`} title={node.disk.reason ?? undefined}>
                disk low
              </span>
            )}
            {me.role === "admin" && <DrainControl node={node} onChanged={cluster.replaceNode} />}
          </h2>
          <p class="muted small">
            {node.hostname} · {node.address} · last heartbeat {formatTime(node.last_heartbeat)}
          </p>
          <HostLoad node={node} />
          <DataDisk node={node} />
          <table>
            <TableHead
              columns={[
                "Device", "Name", "Utilization", "Memory", "Temp / power", "Job", "Sampled"
              ]}
            />
            <tbody>
              {node.devices.map((device) => {
                const sample = cluster.store.latest(node.name, device.index);
                const job = device.job_id ?? undefined; // the server's booking, never job states
                const total = sample?.mem_total ?? device.memory_total;
                return (
                  <tr data-testid={`device-row-${node.name}-${device.index}`}>
                    <td>{deviceLabel(device.kind, device.index)}</td>
                    <td>
                      {device.name}
                      {device.stragglers && (
                        <span class="badge straggler" data-testid={`stragglers-${node.name}-${device.index}`} title={stragglerTitle(device.stragglers)}>
                          {stragglerBadge(device.stragglers)}
                        </span>
                      )}
                    </td>
                    <td>
                      <Meter percent={sample?.util} />
                    </td>
                    <td data-testid={`device-memory-${node.name}-${device.index}`}>
                      {formatBytes(sample?.mem_used)}
                      {/* a CPU slot's total is the host's RAM, which the node's slots share (the server says so) */}
                      {total ? (device.memory_shared ? ` of the host's ${formatBytes(total)}, shared` : ` / ${formatBytes(total)}`) : ""}
                    </td>
                    <td>
                      {sample?.temperature != null ? `${sample.temperature.toFixed(0)} °C` : "—"}
                      {" / "}
                      {sample?.power != null ? `${sample.power.toFixed(0)} W` : "—"}
                    </td>
                    <td>
                      {job === undefined ? (
                        <span class="muted">free</span>
                      ) : (
                        <>
                          <Link href={`/jobs/${job}`}>#{job}</Link>
                          {device.rank != null && <span class="muted"> rank {device.rank}</span>}
                        </>
                      )}
                    </td>
                    <td>{formatTime(sample?.time, false)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {charts && node.devices.length > 0 && (
            <DeviceCharts cluster={cluster} node={node.name} devices={node.devices.map((d) => d.index)} testIdPrefix={`cluster-chart-${node.name}-`} height={130} />
          )}
        </div>
      ))}
    </section>
  );
}

/** Under the Slurm executor: Slurm's own nodes and their state, as the scheduler last read them
 * (`scontrol show node`, every 10 s); the panels below are Trainboard's slots (ranks), not hosts. */
function ManagerNodes() {
  const [view, setView] = useState<ManagerView | null>(null);
  useEffect(() => {
    let current = true;
    const load = () =>
      ok(client.GET("/api/nodes"))
        .then((body) => current && setView(body.manager ?? null))
        .catch(() => {}); // the next poll tries again
    load();
    const timer = setInterval(load, 10_000);
    return () => {
      current = false;
      clearInterval(timer);
    };
  }, []);
  if (!view) return null;
  const summary = managerSummary(view);
  const name = view.manager === "slurm" ? "Slurm" : view.manager;
  return (
    <div class="panel" data-testid="manager-nodes">
      <h2>
        {name}'s nodes <span class="muted small">{summary.line}</span>
      </h2>
      <p class="muted small">
        {name} allocates and places every job; read {formatTime(view.observed_at)}. The panels below are Trainboard's slots: a gang's k-th
        node is slot k, on whichever host {name} gave it.
      </p>
      {summary.warning && (
        <p class="error" data-testid="manager-warning">
          {summary.warning}
        </p>
      )}
      <table>
        <TableHead columns={["Node", "State", "Capacity", "Partitions", "Jobs", "Reason"]} />
        <tbody>
          {view.nodes.map((n) => (
            <tr data-testid={`manager-node-${n.name}`}>
              <td>{n.name}</td>
              <td>
                <span class={`badge node-${n.health}`} data-testid={`manager-health-${n.name}`}>
                  {n.health}
                </span>{" "}
                <span class="muted small">{n.state}</span>
              </td>
              <td>{capacity(n)}</td>
              <td>{n.partitions.join(", ")}</td>
              <td data-testid={`manager-jobs-${n.name}`}>
                {n.jobs.length === 0 ? (
                  <span class="muted">none</span>
                ) : (
                  n.jobs.map((job, i) => (
                    <>
                      {i > 0 && ", "}
                      <Link href={`/jobs/${job}`}>#{job}</Link>
                    </>
                  ))
                )}
              </td>
              <td>{n.reason ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Drain stops new placements on a node (running jobs finish); undrain opens it again. */
function DrainControl({ node, onChanged }: { node: Node; onChanged: (node: Node) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const action = node.drained ? "undrain" : "drain";
  const go = async () => {
    if (action === "drain" && !window.confirm(`Drain ${node.name}? No new job will be placed on it; running jobs go on.`)) return;
    setBusy(true);
    setError(null);
    try {
      const path = { params: { path: { name: node.name } } };
      onChanged(await ok(action === "drain" ? client.POST("/api/nodes/{name}/drain", path) : client.POST("/api/nodes/{name}/undrain", path)));
    } catch (err) {
      setError(String(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      {" "}
      <button type="button" class="secondary small" data-testid={`${action}-${node.name}`} disabled={busy} onClick={go}>
        {node.drained ? "Undrain" : "Drain"}
      </button>
      {error && <span class="error small">{error}</span>}
    </>
  );
}

/** The whole machine (all cores, all memory): what CPU slots share, labelled as such. */
function HostLoad({ node }: { node: Node }) {
  const host = node.host;
  if (!host) return null;
  const memory = host.memory_total ? (100 * (host.memory_used ?? 0)) / host.memory_total : null;
  return (
    <p class="host-load small" data-testid={`host-${node.name}`}>
      <span>
        Machine CPU{host.cpus ? ` (${host.cpus} cores)` : ""} <Meter percent={host.cpu_percent} />
      </span>
      <span>
        Machine memory <Meter percent={memory} /> {formatBytes(host.memory_used)}
        {host.memory_total ? ` / ${formatBytes(host.memory_total)}` : ""}
      </span>
    </p>
  );
}

/** The node's data dir (database, runs, checkpoints): free of total; why it takes no new work when low. */
function DataDisk({ node }: { node: Node }) {
  const disk = node.disk;
  if (!disk) return null;
  const used = disk.total ? (100 * (disk.total - disk.free)) / disk.total : null;
  return (
    <p class={`host-load small${disk.low ? " disk-low-line" : ""}`} data-testid={`disk-${node.name}`}>
      <span>
        Data disk <Meter percent={used} /> {formatBytes(disk.free)} free of {formatBytes(disk.total)}
      </span>
      {disk.low && (
        <span class="error" data-testid={`disk-low-reason-${node.name}`}>
          {disk.reason ?? "disk low"}: no new work is placed on this node until space is freed
        </span>
      )}
    </p>
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
