/** The memory a template job will need per device, beside each node's device memory. */
import { formatBytes } from "../../lib/format";
import type { DeviceFit } from "../../api/types";
import type { Checked } from "../../lib/validation";
import { TableHead } from "../../components/bits";

/**
 * What a device's memory holds, from the server's fields (never its note's words): a GPU's own
 * memory, or a CPU slot's share of the host's RAM (memory_shared), which the node's slots share.
 */
export function fitNote(d: Pick<DeviceFit, "memory_shared" | "ranks" | "need" | "memory_total">): string {
  if (!d.memory_shared) return `${formatBytes(d.need)} of ${formatBytes(d.memory_total)}`;
  return `${formatBytes(d.need)} for ${d.ranks === 1 ? "1 rank" : `${d.ranks} ranks`} in the host's RAM`;
}

/** A device's memory as it is: its own, or the host's RAM that a node's CPU slots share. */
export function memoryText(d: Pick<DeviceFit, "memory_shared" | "memory_total">): string {
  return d.memory_shared ? `${formatBytes(d.memory_total)} host RAM, shared by the node's CPU slots` : formatBytes(d.memory_total);
}

/** The server's memory estimate for the form's spec (from POST /api/jobs/validate). */
export function MemoryFit({ checked }: { checked: Checked }) {
  const estimate = checked.answer?.memory;
  if (!estimate) {
    const why = checked.status === "checking" ? "estimating…" : "no estimate until the spec is valid";
    return (
      <p class="muted small" data-testid="memory-estimate-pending">
        Memory per device: {why}
      </p>
    );
  }
  // The server's total is a GPU rank's (its CUDA context included); a CPU rank has no CUDA
  // runtime: it needs the rest, in the host's RAM, which the node's slots share (issue #33:
  // CPU slots read "600 MiB (CUDA runtime)" beside "0.00 GiB").
  const kinds = new Set(estimate.devices.map((d) => d.kind));
  const gpu = kinds.has("gpu") || kinds.size === 0;
  const cpu = kinds.has("cpu") || kinds.size === 0;
  const perCpuRank = estimate.total - estimate.runtime;
  const model: [string, number][] = [
    ["parameters", estimate.parameters],
    ["gradients", estimate.gradients],
    ["optimizer state", estimate.optimizer_state],
    ["activations", estimate.activations],
  ];
  const parts = (extra: [string, number][]) => [...model, ...extra].map(([n, b]) => `${n} ${formatBytes(b)}`).join(", ");
  return (
    <div class="implications" data-testid="memory-estimate" aria-live="polite">
      <p>
        Memory per device <span class="muted">({estimate.parameter_count.toLocaleString("en-US")} parameters; {estimate.note})</span>
      </p>
      <ul class="memory-lines">
        {gpu && (
          <li data-testid="memory-gpu">
            per GPU: <strong data-testid="memory-total">{formatBytes(estimate.total)}</strong>{" "}
            <span class="muted">({parts([["CUDA runtime", estimate.runtime]])})</span>
          </li>
        )}
        {cpu && (
          <li data-testid="memory-cpu">
            per CPU rank, in the host's RAM: <strong data-testid="memory-cpu-total">{formatBytes(perCpuRank)}</strong>{" "}
            <span class="muted">({parts([])}; no CUDA runtime; a node's CPU slots share its RAM)</span>
          </li>
        )}
        {estimate.server != null && (
          <li data-testid="memory-server">
            the dedicated server: <strong>{formatBytes(estimate.server - (gpu ? 0 : estimate.runtime))}</strong>{" "}
            <span class="muted">(no activations: it trains no batch; the figures above are a worker's)</span>
          </li>
        )}
      </ul>
      {estimate.devices.length > 0 && (
        <table class="memory-fit" data-testid="memory-fit">
          <TableHead columns={["Node", "Device", "Memory", "Fits"]} />
          <tbody>
            {estimate.devices.map((d) => (
              <tr data-testid={`memory-fit-${d.node}-${d.index}`} data-fits={String(d.fits)}>
                <td>{d.node}</td>
                <td>
                  {d.index}: {d.name}
                </td>
                <td>{memoryText(d)}</td>
                <td class={d.fits === false ? "problem" : undefined}>
                  {d.fits === null ? "unknown" : d.fits ? "yes" : "no"} <span class="muted">({fitNote(d)})</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {estimate.warnings.map((w) => (
        <p class="warning" data-testid="memory-warning">
          {w}
        </p>
      ))}
    </div>
  );
}
