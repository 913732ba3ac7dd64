/** Light/dark theme: follows prefers-color-scheme unless the user picked one (stored). */
import { useEffect, useState } from "preact/hooks";

export type ThemeChoice = "auto" | "light" | "dark";
const KEY = "trainboard.theme";
const media = window.matchMedia("(prefers-color-scheme: dark)");
const listeners = new Set<() => void>();

export function themeChoice(): ThemeChoice {
  const stored = localStorage.getItem(KEY);
  return stored === "light" || stored === "dark" ? stored : "auto";
}

export function effectiveTheme(): "light" | "dark" {
  const choice = themeChoice();
  if (choice !== "auto") return choice;
  return media.matches ? "dark" : "light";
}

export function setThemeChoice(choice: ThemeChoice): void {
  if (choice === "auto") localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, choice);
  applyTheme();
}

/** Put the effective theme on <html data-theme> and tell the charts. */
export function applyTheme(): void {
  document.documentElement.dataset.theme = effectiveTheme();
  listeners.forEach((fn) => fn());
}
media.addEventListener("change", applyTheme);

/** The effective theme; re-renders when it changes. */
export function useTheme(): "light" | "dark" {
  const [theme, setTheme] = useState(effectiveTheme());
  useEffect(() => {
    const fn = () => setTheme(effectiveTheme());
    listeners.add(fn);
    return () => listeners.delete(fn);
  }, []);
  return theme;
}

/** A CSS custom property's value on <html>. */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}
