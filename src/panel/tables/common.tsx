/**
 * Pieces the panel's tables share: the message shown in place of missing
 * content ({@link EmptyState}, also used by the panel itself) and the
 * sortable column header of the holders and processes tables
 * ({@link SortHeader}). Both
 * render their props only.
 */
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

/**
 * One Python identifier or holder path (`model`, `Out[2]`, `trainer.ema`) in
 * the code font, on one line: `span.jp-GpuHygiene-ident`, cut with an
 * ellipsis when its column is narrower (the full text in `title`), never
 * broken mid-word.
 */
export function Identifier(props: { name: string }): JSX.Element {
  return (
    <span className="jp-GpuHygiene-ident" title={props.name}>
      {props.name}
    </span>
  );
}

/**
 * Names as {@link Identifier}s separated by ", ", at most `max` and then
 * `+n`: lines break between names only.
 */
export function IdentifierList(props: {
  names: ReadonlyArray<string>;
  max: number;
}): JSX.Element {
  const { names, max } = props;
  const shown = names.slice(0, max);
  return (
    <>
      {shown.map((name, i) => (
        <React.Fragment key={`${name}:${i}`}>
          {i > 0 && ', '}
          <Identifier name={name} />
        </React.Fragment>
      ))}
      {names.length > max && ` +${names.length - max}`}
    </>
  );
}
