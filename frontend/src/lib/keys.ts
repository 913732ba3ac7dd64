/** Keyboard conventions every view shares. */
import { useLayoutEffect, useRef } from "preact/hooks";

/** Whether a key event is a plain Escape (not one an input method is composing with). */
export function isEscape(event: Pick<KeyboardEvent, "key" | "isComposing">): boolean {
  return event.key === "Escape" && !event.isComposing;
}

/** While `onEscape` is given, Escape anywhere on the page calls it (closing a dialog); null: not listening. */
export function useEscape(onEscape: (() => void) | null): void {
  const latest = useRef(onEscape);
  latest.current = onEscape;
  const active = onEscape !== null;
  // a layout effect: listening from the moment the dialog is drawn (an effect waits for the
  // next frame, and an Escape pressed as soon as the dialog showed was lost)
  useLayoutEffect(() => {
    if (!active) return;
    const listener = (event: KeyboardEvent) => {
      if (!isEscape(event) || !latest.current) return;
      event.preventDefault();
      latest.current();
    };
    document.addEventListener("keydown", listener);
    return () => document.removeEventListener("keydown", listener);
  }, [active]);
}
