/**
 * `text` safe to print on a terminal: control characters (C0 but tab and newline, DEL, C1) become
 * \xNN escapes, so a name read from a hostile file cannot move the cursor or recolour the screen.
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}
