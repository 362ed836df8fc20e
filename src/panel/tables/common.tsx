/**
 * Pieces the panel's tables share: the message shown in place of missing
 * content ({@link EmptyState}, also used by the panel itself) and the
 * sortable column header of the holders and processes tables
 * ({@link SortHeader}). Both
 * render their props only.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

/**
 * A message in place of content: what is missing and what to do.
 *
 * Renders `div.jp-GpuHygiene-empty` with `data-kind` set to `kind` (e.g.
 * `"no-models"`, `"waiting"`, an agent status), so tests and styles can tell
 * the empty states apart.
 */
export function EmptyState(props: {
  /** The message, already translated. */
  children: React.ReactNode;
  /** What is missing, for `data-kind`. */
  kind?: string;
}): JSX.Element {
  return (
    <div className="jp-GpuHygiene-empty" data-kind={props.kind}>
      {props.children}
    </div>
  );
}

/** A table's sort: a column and a direction. */
export interface ITableSort<K extends string> {
  key: K;
  direction: 'asc' | 'desc';
}

/**
 * A column header that sorts a table (the holders, the processes on the
 * GPU) by `column`.
 *
 * A click on the active column flips its direction; a click on another
 * column sorts it descending for sizes (`bytes`, or `descendingFirst`) and
 * ascending for text. The header carries `aria-sort`, and its button
 * `data-column` and a ▲/▼ mark.
 */
export function SortHeader<K extends string>(props: {
  /** The column this header sorts by. */
  column: K;
  /** The table's current sort. */
  sort: ITableSort<K>;
  /** Called with the sort a click asks for. */
  onSort: (sort: ITableSort<K>) => void;
  /** Whether a first click sorts descending (default: for `bytes`). */
  descendingFirst?: boolean;
  /** The column header's tooltip. */
  title?: string;
  /** The column's label, already translated. */
  children: React.ReactNode;
}): JSX.Element {
  const { column, sort, onSort } = props;
  const active = sort.key === column;
  const descendingFirst = props.descendingFirst ?? column === 'bytes';
  const next: ITableSort<K> = {
    key: column,
    direction:
      active && sort.direction === 'desc'
        ? 'asc'
        : active
          ? 'desc'
          : descendingFirst
            ? 'desc'
            : 'asc'
  };
  return (
    <th
      scope="col"
      title={props.title}
      aria-sort={
        active
          ? sort.direction === 'asc'
            ? 'ascending'
            : 'descending'
          : 'none'
      }
    >
      <button
        className="jp-GpuHygiene-sort"
        data-column={column}
        onClick={() => onSort(next)}
      >
        {props.children}
        {active ? (sort.direction === 'asc' ? ' ▲' : ' ▼') : ''}
      </button>
    </th>
  );
}

/** Longest end of a path kept whole when its column is too narrow. */
const KEPT_TAIL = 14;

/**
 * Where the end of `name` that stays visible starts: its last attribute or
 * key (`.ema`, `[0]`, `['val']`), at most {@link KEPT_TAIL} characters; 0
 * for a short name (nothing to keep apart).
 */
export function keptTail(name: string): number {
  if (name.length <= KEPT_TAIL + 4) {
    return 0;
  }
  const last = Math.max(name.lastIndexOf('.'), name.lastIndexOf('['));
  return last > 0 && name.length - last <= KEPT_TAIL
    ? last
    : name.length - KEPT_TAIL;
}

/**
 * One Python identifier or holder path (`model`, `Out[2]`, `trainer.ema`) in
 * the code font, on one line: `span.jp-GpuHygiene-ident`. When its column is
 * narrower, the path is cut in the middle ("trainer.st….ema"): its start and
 * its last attribute or key ({@link keptTail}) stay, the whole path is in
 * `title` and in the text a screen reader or a copy gets; never broken
 * mid-word.
 */
export function Identifier(props: { name: string }): JSX.Element {
  const { name } = props;
  const cut = keptTail(name);
  if (!cut) {
    return (
      <span className="jp-GpuHygiene-ident" title={name}>
        {name}
      </span>
    );
  }
  return (
    <span
      className="jp-GpuHygiene-ident jp-GpuHygiene-ident-split"
      title={name}
    >
      <span className="jp-GpuHygiene-identHead">{name.slice(0, cut)}</span>
      <span className="jp-GpuHygiene-identTail">{name.slice(cut)}</span>
    </span>
  );
}

/**
 * Names as {@link Identifier}s separated by ", ", at most `max` and then how
 * many more in words ("and 2 more"; every name is in the cell's title): lines
 * break between names only.
 */
export function IdentifierList(props: {
  names: ReadonlyArray<string>;
  max: number;
  trans: TranslationBundle;
}): JSX.Element {
  const { names, max, trans } = props;
  const shown = names.slice(0, max);
  return (
    <>
      {shown.map((name, i) => (
        <React.Fragment key={`${name}:${i}`}>
          {i > 0 && ' '}
          {/* the comma stays on the line of its name */}
          <span className="jp-GpuHygiene-nameItem">
            <Identifier name={name} />
            {i < shown.length - 1 && ','}
          </span>
        </React.Fragment>
      ))}
      {names.length > max &&
        ` ${trans._n('and %1 more', 'and %1 more', names.length - max)}`}
    </>
  );
}
