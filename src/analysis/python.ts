/**
 * What may reach generated Python code: plain names and one-line comments.
 * Small on purpose: the findings and the commands' `isEnabled` (JupyterLab's
 * start path) need these, while the cell generators (`codegen/`: the clean
 * cell and others) load only when a command inserts a cell.
 */

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const KEYWORDS = new Set(
  (
    'False None True and as assert async await break class continue def del elif else except ' +
    'finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'
  ).split(' ')
);

/**
 * Whether `name` can be written in code as a plain Python name (an ASCII
 * identifier that is not a keyword). Holder names come from the kernel and
 * may be anything; only these ever reach generated code.
 */
export function isPythonIdentifier(name: string): boolean {
  return IDENTIFIER.test(name) && !KEYWORDS.has(name);
}

/**
 * Make text safe to put in a Python comment: one line, printable, bounded.
 * (Class names and labels come from the kernel and may contain anything.)
 */
export function commentSafe(text: string, maxLength = 120): string {
  const oneLine = text.replace(
    /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g,
    ' '
  );
  return oneLine.length > maxLength
    ? `${oneLine.slice(0, maxLength - 1)}…`
    : oneLine;
}

/**
 * The `def` line(s) of a generated cell's helper function `helper` with its
 * own parameters (`params`, Python source such as `name="model"`), then the
 * first line of its body. A cell defines its helper in the user namespace and
 * calls it (its last line is `${helper}()`): the helper first gives back the
 * user's own variable of that name (kept in `was` when the `def` ran) or
 * unbinds itself, so a variable of the user's never goes (issue 31).
 */
export function helperHead(
  helper: string,
  params: string | ReadonlyArray<string>
): string[] {
  // the parameters as many to a line as fit in CODE_WIDTH columns
  const lines: string[] = [];
  let line = `def ${helper}(`;
  const first = line;
  for (const param of typeof params === 'string' ? [params] : params) {
    const next = line === first ? `${line}${param},` : `${line} ${param},`;
    if (next.length > CODE_WIDTH && line !== first) {
      lines.push(line);
      line = `        ${param},`;
    } else {
      line = next;
    }
  }
  return [
    ...lines,
    line,
    `        was=globals().get("${helper}", ...),`,
    `        me="${helper}"):`,
    '    globals().pop(me) if was is ... else globals().update({me: was})  # yours'
  ];
}

/** Most columns of a generated cell's code line (black's default). */
export const CODE_WIDTH = 88;

/**
 * `text` as `# ` comment lines of at most `width` columns, wrapped between
 * words (a word longer than a line is cut); kernel text is made
 * {@link commentSafe} first.
 */
export function commentLines(text: string, width = 79): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of commentSafe(text, 400).split(' ')) {
    if (line.length + 1 + word.length > width && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line = `${line} ${word}`;
  }
  lines.push(line);
  return lines.map(l => commentSafe(l, width));
}

const VALUE_ID = /^0x[0-9a-f]{1,16}$/;

/**
 * A holder's `valueId` (`hex(id())` of what its variable held when the
 * inventory was built) as a Python int literal, or `None` when the agent sent
 * none (agents before 0.9.0; a fix cell then acts by name as before) or it is
 * not an address (nothing else reaches code).
 */
export function pyHeld(valueId: string | null | undefined): string {
  return valueId && VALUE_ID.test(valueId) ? valueId : 'None';
}

/**
 * The two lines (4-space indented) with which a fix cell's helper leaves
 * `ns[name]` alone when it no longer holds the object the finding was built
 * on (`held`, a parameter: {@link pyHeld}), and says so in its output. A
 * name that is gone passes: each cell treats that itself.
 */
export const HELD_CHECK = [
  '    if held is not None and name in ns and id(ns[name]) != held:',
  '        return print(f"# {name} changed since the finding: kept")'
];
