/** One line saying why a request was refused: a 422's fields and messages, or the detail. */
import { ApiError } from "../api/http";
import { cleanMessage, dottedField } from "./errors";

export function problemText(err: unknown): string {
  if (err instanceof ApiError && Array.isArray(err.detail)) {
    return err.detail
      .map((issue: { loc?: (string | number)[]; msg?: string }) => {
        const field = issue.loc ? dottedField(issue.loc) : "";
        return `${field ? `${field}: ` : ""}${cleanMessage(issue.msg ?? "")}`;
      })
      .join("; ");
  }
  return err instanceof Error ? err.message : String(err);
}
