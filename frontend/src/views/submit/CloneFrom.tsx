/** The submit form's "clone from job N" box. */
import { useState } from "preact/hooks";
import { navigate } from "../../router";

/** "Clone from job N": reloads the form with that job's spec. */
export function CloneFrom({ current }: { current: number | null }) {
  const [text, setText] = useState(current === null ? "" : String(current));
  return (
    <form
      class="inline-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (/^\d+$/.test(text.trim())) navigate(`/submit?clone=${text.trim()}`);
      }}
    >
      <label for="clone-from" class="inline">
        Clone from job #
      </label>
      <input id="clone-from" class="narrow" inputMode="numeric" data-testid="clone-from" value={text} onInput={(e) => setText(e.currentTarget.value)} />
      <button type="submit" class="secondary" data-testid="clone-from-go">
        Load
      </button>
    </form>
  );
}
