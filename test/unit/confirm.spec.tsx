/**
 * The fixes' confirmation (src/commands/confirm.tsx, issue 29, item 5): a
 * value marked as code keeps its place in any word order, is rendered as
 * text (a hostile name is never markup), and the body shows the cell.
 */
import { nullTranslator } from '@jupyterlab/translation';
import { renderToStaticMarkup } from 'react-dom/server';
import * as React from 'react';
import { asCode, confirmBody, withCode } from '../../src/commands/confirm';
import { elementsOf, textOf } from './dialog-text';
import { zhBundle } from './zh-bundle';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

describe('names shown as code in a confirmation', () => {
  it('marks each value, in the translation’s own word order', () => {
    const zh = zhBundle();
    const title = zh.__('Delete the variable %1?', asCode('model'));
    const nodes = withCode(title);
    expect(elementsOf(nodes, 'code')).toEqual(['model']);
    expect(textOf(nodes)).toBe(title.replace(/[\u0002\u0003]/g, ''));
    expect(textOf(nodes)).not.toContain('Delete');
  });

  it('renders a hostile name as text, never markup, and drops stray markers', () => {
    const name = '<img src=x onerror=alert(1)>\u0003tail';
    const html = renderToStaticMarkup(
      <span>{withCode(trans.__('Delete the variable %1?', asCode(name)))}</span>
    );
    expect(html).toBe(
      '<span>Delete the variable <code>&lt;img src=x onerror=alert(1)&gt;tail</code>?</span>'
    );
  });

  it('shows the cell it inserts below the explanation, or no block without one', () => {
    const code = '# gpu-hygiene: delete_variable\ndel results';
    const body = confirmBody(
      trans.__('Delete %1?', asCode('results')),
      code,
      trans
    );
    expect(elementsOf(body, 'pre')).toEqual([code]);
    expect(elementsOf(body, 'code')).toEqual(['results', code]);
    expect(textOf(body)).toContain('The cell it inserts:');
    expect(
      elementsOf(confirmBody('Restart?', undefined, trans), 'pre')
    ).toEqual([]);
  });
});
