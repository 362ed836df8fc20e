/**
 * The confirmation dialog of the fixes (issue 29, item 5): names in code
 * font, and the cell that will run, shown in full before the user accepts.
 *
 * A message marks what it shows as code by passing {@link asCode}(value) as a
 * translation argument (`trans.__('Delete the variable %1?', asCode(name))`):
 * the translated text keeps its word order and the value is rendered as a
 * `<code>` element, as text (React escapes it), never as markup.
 */
import * as React from 'react';
import type { TranslationBundle } from '@jupyterlab/translation';

const OPEN = '\u0002';
const CLOSE = '\u0003';
const MARKED = new RegExp(`${OPEN}([^${CLOSE}]*)${CLOSE}`);

/** `value` marked to be shown in code font by {@link withCode}. */
export function asCode(value: string): string {
  // a marker inside the value would end the code span early: dropped
  return `${OPEN}${value.replace(/[\u0002\u0003]/g, '')}${CLOSE}`;
}

/**
 * `text` as React nodes, each {@link asCode} part a `<code>` element.
 *
 * @returns strings and elements, in order (keys by position).
 */
export function withCode(text: string): React.ReactNode[] {
  return text
    .split(MARKED)
    .map((part, i) => (i % 2 ? <code key={i}>{part}</code> : part))
    .filter(part => part !== '');
}

/**
 * The dialog's body: the explanation, then, when `code` is given, the cell
 * that will be inserted (and run, if the `cleanAction` setting says so) in a
 * scrollable, focusable block.
 */
export function confirmBody(
  text: string,
  code: string | undefined,
  trans: TranslationBundle
): React.ReactElement {
  return (
    <div className="jp-GpuHygiene-confirm">
      <p>{withCode(text)}</p>
      {code !== undefined && (
        <>
          <p className="jp-GpuHygiene-confirmLead">
            {trans.__('The cell it inserts:')}
          </p>
          <pre
            className="jp-GpuHygiene-cellPreview"
            role="region"
            tabIndex={0}
            aria-label={trans.__('The cell it inserts')}
          >
            <code>{code}</code>
          </pre>
        </>
      )}
    </div>
  );
}
