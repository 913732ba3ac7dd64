/** A free/busy overview of the cluster's devices (the data comes from `useCluster`). */
import type { Node } from "../api/types";
import { deviceLabel } from "./bits";

/** One chip per device: busy (a live slice of a job holds it, as the server books it) or free. */
export function ClusterSummary({ nodes }: { nodes: Node[] | null }) {
  if (!nodes) return null;
  if (nodes.length === 0) return <p class="muted">No worker nodes have registered yet.</p>;
  const total = nodes.reduce((n, node) => n + node.devices.length, 0);
  const used = nodes.reduce((n, node) => n + node.devices.filter((d) => d.job_id != null).length, 0);
  return (
    <div class="cluster-summary" data-testid="cluster-summary" data-free={total - used} data-busy={used}>
      <strong>
        {total - used} free / {used} busy
      </strong>
      {nodes.map((node) => (
        <span class="node-chips">
          <span class="muted">{node.name}</span>
          {node.devices.map((device) => {
            const job = device.job_id ?? undefined;
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
