/**
 * What a dialog shows, read from the title or body handed to `showDialog`
 * (a string, or React elements as src/commands/confirm.tsx builds them).
 */
import * as React from 'react';

/** The text of `node`, as a reader sees it (elements' children in order). */
export function textOf(node: unknown): string {
  if (node === null || node === undefined || typeof node === 'boolean') {
    return '';
  }
  if (typeof node === 'string' || typeof node === 'number') {
    return String(node);
  }
  if (Array.isArray(node)) {
    return node.map(textOf).join('');
  }
  if (React.isValidElement(node)) {
    return textOf((node.props as { children?: unknown }).children);
  }
  return '';
}

/** The texts of the `tag` elements in `node` (`code` for the names shown as code). */
export function elementsOf(node: unknown, tag: string): string[] {
  if (Array.isArray(node)) {
    return node.flatMap(n => elementsOf(n, tag));
  }
  if (!React.isValidElement(node)) {
    return [];
  }
  const children = (node.props as { children?: unknown }).children;
  return node.type === tag ? [textOf(children)] : elementsOf(children, tag);
}
