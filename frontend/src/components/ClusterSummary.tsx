/** A free/busy overview of the cluster's devices (the data comes from `useCluster`). */
import type { Node } from "../api/types";
import { deviceLabel } from "./bits";

/** One chip per device: busy (held by an active job) or free. */
export function ClusterSummary({ nodes, busy }: { nodes: Node[] | null; busy: Map<string, Map<number, number>> }) {
  if (!nodes) return null;
  if (nodes.length === 0) return <p class="muted">No worker nodes have registered yet.</p>;
  const total = nodes.reduce((n, node) => n + node.devices.length, 0);
  const isBusy = (node: Node, index: number, jobId: number | null | undefined) => jobId != null || !!busy.get(node.name)?.has(index);
  const used = nodes.reduce((n, node) => n + node.devices.filter((d) => isBusy(node, d.index, d.job_id)).length, 0);
  return (
    <div class="cluster-summary" data-testid="cluster-summary" data-free={total - used} data-busy={used}>
      <strong>
        {total - used} free / {used} busy
      </strong>
      {nodes.map((node) => (
        <span class="node-chips">
          <span class="muted">{node.name}</span>
          {node.devices.map((device) => {
            const job = device.job_id ?? busy.get(node.name)?.get(device.index);
            const label = deviceLabel(device.kind, device.index);
            return (
              <span
                class={`chip ${job === undefined ? "free" : "busy"}`}
                title={job === undefined ? `${label}: free` : `${label}: job ${job}`}
              >
                {device.index}
              </span>
            );
          })}
        </span>
      ))}
    </div>
  );
}
