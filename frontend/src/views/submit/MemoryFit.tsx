/** The memory a template job will need per device, beside each node's device memory. */
import { formatBytes } from "../../lib/format";
import type { Checked } from "../../lib/validation";
import { TableHead } from "../../components/bits";

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
  const parts: [string, number][] = [
    ["parameters", estimate.parameters],
    ["gradients", estimate.gradients],
    ["optimizer state", estimate.optimizer_state],
    ["activations", estimate.activations],
    ["CUDA runtime", estimate.runtime],
  ];
  return (
    <div class="implications" data-testid="memory-estimate" aria-live="polite">
      <p>
        Memory per device: <strong data-testid="memory-total">{formatBytes(estimate.total)}</strong>{" "}
        <span class="muted">
          ({estimate.parameter_count.toLocaleString("en-US")} parameters; {parts.map(([n, b]) => `${n} ${formatBytes(b)}`).join(", ")}; {estimate.note})
        </span>
      </p>
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
                <td>{formatBytes(d.memory_total)}</td>
                <td class={d.fits === false ? "problem" : undefined}>
                  {d.fits === null ? "unknown" : d.fits ? "yes" : "no"} <span class="muted">({d.note})</span>
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
