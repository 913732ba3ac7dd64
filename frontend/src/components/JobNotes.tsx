/** After submit: rename, tags, notes (markdown, rendered as elements only) and archive. */
import { useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Job } from "../api/types";
import { useEscape } from "../lib/keys";
import { Markdown } from "../lib/markdown";
import { problemText } from "../lib/problems";

type Editing = "name" | "tags" | "notes" | null;
type Change = { name?: string; tags?: string[]; notes?: string; archived?: boolean };

export function JobNotes({ job, onChanged }: { job: Job; onChanged: (job: Job) => void }) {
  const [editing, setEditing] = useState<Editing>(null);
  const [draft, setDraft] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const save = async (change: Change, what: Editing = null) => {
    setBusy(true);
    setError(null);
    try {
      onChanged(await ok(client.PATCH("/api/jobs/{job_id}", { params: { path: { job_id: job.id } }, body: change })));
      setEditing((current) => (current === what ? null : current)); // another edit opened meanwhile stays
    } catch (err) {
      setError(problemText(err));
    } finally {
      setBusy(false);
    }
  };
  // Escape closes the open edit without saving, like its Cancel button
  useEscape(editing && !busy ? () => setEditing(null) : null);
  const edit = (what: Editing, value: string) => {
    setError(null);
    setDraft(value);
    setEditing(what);
  };
  const submit = (event: Event) => {
    event.preventDefault();
    if (editing === "name") void save({ name: draft.trim() }, "name");
    if (editing === "tags") void save({ tags: draft.split(/[\s,]+/).filter(Boolean) }, "tags");
    if (editing === "notes") void save({ notes: draft }, "notes");
  };

  return (
    <div class="job-notes" data-testid="job-notes">
      <div class="actions">
        <button type="button" class="ghost" data-testid="rename-button" onClick={() => edit("name", job.name)}>
          Rename
        </button>
        <button type="button" class="ghost" data-testid="tags-button" onClick={() => edit("tags", job.tags.join(", "))}>
          Edit tags
        </button>
        <button type="button" class="ghost" data-testid="notes-button" onClick={() => edit("notes", job.notes ?? "")}>
          {job.notes ? "Edit notes" : "Add notes"}
        </button>
        <button type="button" class="ghost" data-testid="archive-button" disabled={busy} onClick={() => void save({ archived: !job.archived })}>
          {job.archived ? "Restore from archive" : "Archive"}
        </button>
        <span data-testid="job-tags">
          {job.tags.map((tag) => (
            <span class="tag">{tag}</span>
          ))}
        </span>
        {job.archived && <span class="tag" data-testid="archived-tag">archived</span>}
      </div>
      {editing && (
        <form class="note-editor" onSubmit={submit}>
          {editing === "notes" ? (
            <textarea rows={6} aria-label="Notes (markdown)" data-testid="notes-input" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
          ) : (
            <input
              aria-label={editing === "name" ? "Name" : "Tags, separated by commas"}
              data-testid={`${editing}-input`}
              value={draft}
              onInput={(e) => setDraft(e.currentTarget.value)}
            />
          )}
          <button type="submit" data-testid="save-edit" disabled={busy}>
            Save
          </button>
          <button type="button" class="ghost" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </form>
      )}
      {error && (
        <p class="error" role="alert" data-testid="edit-error">
          {error}
        </p>
      )}
      {job.notes && editing !== "notes" && <Markdown text={job.notes} testId="notes-rendered" />}
    </div>
  );
}
