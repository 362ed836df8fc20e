/**
 * The zh_CN catalogue against the source: every string that src/ passes to
 * `trans.__`, `trans._n`, `trans._p` (or `_np`) and every title/description of
 * schema/plugin.json has a zh_CN entry in the JSON that jupyterlab_server serves
 * (jupyterlab_gpu_hygiene/locale/zh_CN/LC_MESSAGES/jupyterlab_gpu_hygiene.json,
 * compiled from the .po beside it by `make i18n`), with the same placeholders.
 *
 * The strings are extracted with the TypeScript compiler API, from any receiver
 * named `trans` (`trans.__`, `this._trans.__`, `ctx.trans._n`...), so a string
 * added later fails here until `make i18n` has merged it into the .po and it is
 * translated. A call whose message is not a literal cannot be extracted by any
 * gettext tool and fails too.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as ts from 'typescript';
import { DOMAIN, schemaStrings, translateSchema } from '../../src/i18n';
import { zhBundle, zhCatalogue } from './zh-bundle';

const ROOT = path.resolve(__dirname, '..', '..');

/** gettext's separator between a context and its msgid (Jed JSON keys). */
const CONTEXT_GLUE = '\u0004';

interface IMessage {
  context: string | null;
  msgid: string;
  plural: string | null;
  /** file:line of the first use. */
  where: string;
}

/** Method name → positions of [context, msgid, plural] among its arguments. */
const CALLS: Record<string, [number | null, number, number | null]> = {
  __: [null, 0, null],
  gettext: [null, 0, null],
  _n: [null, 0, 1],
  ngettext: [null, 0, 1],
  _p: [0, 1, null],
  pgettext: [0, 1, null],
  _np: [0, 1, 2],
  npgettext: [0, 1, 2]
};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== '_generated' && entry.name !== 'agent') {
        out.push(...sourceFiles(full));
      }
    } else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      out.push(full);
    }
  }
  return out;
}

/** The value of a string literal or a `+` concatenation of them; else null. */
function literal(node: ts.Expression): string | null {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    return node.text;
  }
  if (ts.isParenthesizedExpression(node)) {
    return literal(node.expression);
  }
  if (
    ts.isBinaryExpression(node) &&
    node.operatorToken.kind === ts.SyntaxKind.PlusToken
  ) {
    const left = literal(node.left);
    const right = literal(node.right);
    return left === null || right === null ? null : left + right;
  }
  return null;
}

/**
 * The receivers jupyterlab-translate's extractor (gettext-extract, run by
 * `make i18n`) knows; a bundle called otherwise (`ctx.trans.__`) is found here
 * but never reaches the .po.
 */
const EXTRACTED_RECEIVERS = new Set([
  'trans',
  'this.trans',
  'this._trans',
  'props.trans',
  'this.props.trans'
]);

/** Is `node` (the receiver of `.__`) a translation bundle named trans/_trans? */
function isTrans(node: ts.Expression): boolean {
  if (ts.isIdentifier(node)) {
    return /^_?trans$/.test(node.text);
  }
  if (ts.isPropertyAccessExpression(node)) {
    return /^_?trans$/.test(node.name.text);
  }
  return false;
}

function extractSource(): {
  messages: IMessage[];
  dynamic: string[];
  unextracted: string[];
} {
  const messages: IMessage[] = [];
  const dynamic: string[] = [];
  const unextracted: string[] = [];
  for (const file of sourceFiles(path.join(ROOT, 'src'))) {
    const text = fs.readFileSync(file, 'utf-8');
    const source = ts.createSourceFile(
      file,
      text,
      ts.ScriptTarget.Latest,
      true,
      file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS
    );
    const visit = (node: ts.Node): void => {
      if (
        ts.isCallExpression(node) &&
        ts.isPropertyAccessExpression(node.expression) &&
        node.expression.name.text in CALLS &&
        isTrans(node.expression.expression)
      ) {
        const [ctx, id, plural] = CALLS[node.expression.name.text];
        const { line } = source.getLineAndCharacterOfPosition(node.getStart());
        const where = `${path.relative(ROOT, file)}:${line + 1}`;
        const arg = (i: number | null): string | null =>
          i === null || !node.arguments[i] ? null : literal(node.arguments[i]);
        const msgid = arg(id);
        const receiver = node.expression.expression.getText(source);
        if (!EXTRACTED_RECEIVERS.has(receiver)) {
          unextracted.push(`${where} (${receiver})`);
        }
        if (
          msgid === null ||
          (ctx !== null && arg(ctx) === null) ||
          (plural !== null && arg(plural) === null)
        ) {
          dynamic.push(where);
        } else {
          messages.push({
            context: arg(ctx),
            msgid,
            plural: arg(plural),
            where
          });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { messages, dynamic, unextracted };
}

/** The schema's translatable strings (src/i18n.ts: jupyterlab_server's selectors). */
function extractSchema(): IMessage[] {
  const dir = path.join(ROOT, 'schema');
  return fs
    .readdirSync(dir)
    .filter(n => n.endsWith('.json'))
    .flatMap(name =>
      schemaStrings(
        JSON.parse(fs.readFileSync(path.join(dir, name), 'utf-8'))
      ).map(({ path: at, context, text }) => ({
        context,
        msgid: text,
        plural: null,
        where: `schema/${name}:${at}`
      }))
    );
}

function placeholders(text: string): string[] {
  return [...new Set(text.match(/%\d+/g) ?? [])].sort();
}

const catalogue = zhCatalogue();
const source = extractSource();
const all = [...source.messages, ...extractSchema()];
const keyOf = (m: IMessage): string =>
  m.context === null ? m.msgid : `${m.context}${CONTEXT_GLUE}${m.msgid}`;

describe('zh_CN catalogue', () => {
  it('has the header JupyterLab’s translator files it under (zh-CN, one plural form)', () => {
    const header = catalogue[''] as Record<string, string>;
    expect(header.domain).toBe(DOMAIN);
    // Babel would write zh_Hans_CN; the bundle is looked up as zh-CN.
    expect(header.language).toBe('zh-CN');
    expect(header.plural_forms).toBe('nplurals=1; plural=0;');
  });

  it('finds the strings of src/ and schema/', () => {
    // A floor, not the count: it only proves the extraction works.
    expect(source.messages.length).toBeGreaterThan(400);
    expect(all.some(m => m.context === 'settings')).toBe(true);
    expect(all.some(m => m.plural !== null)).toBe(true);
  });

  it('every message of src/ is a literal (extractable)', () => {
    expect(source.dynamic).toEqual([]);
  });

  it('every call is on a receiver that make i18n extracts (trans, this._trans...)', () => {
    expect(source.unextracted).toEqual([]);
  });

  it('every message has a zh_CN translation with the same placeholders', () => {
    const problems: string[] = [];
    for (const m of all) {
      const entry = catalogue[keyOf(m)];
      if (!Array.isArray(entry) || typeof entry[0] !== 'string' || !entry[0]) {
        problems.push(
          `${m.where}: no zh_CN entry for ${JSON.stringify(m.msgid)}`
        );
        continue;
      }
      const translated = entry[0] as string;
      if (m.plural !== null) {
        // JupyterLab's Gettext takes a plural entry only with two or more forms.
        if (entry.length < 2) {
          problems.push(`${m.where}: plural entry with one form`);
        }
        // In _n the count is %1 whether or not the English shows it.
        const expected = placeholders(m.msgid + m.plural);
        const got = placeholders(translated);
        const missing = expected.filter(p => !got.includes(p));
        const extra = got.filter(p => !expected.includes(p) && p !== '%1');
        if (missing.length || extra.length) {
          problems.push(
            `${m.where}: placeholders ${expected} vs ${got} in ${JSON.stringify(translated)}`
          );
        }
      } else if (
        placeholders(m.msgid).join() !== placeholders(translated).join()
      ) {
        problems.push(
          `${m.where}: placeholders of ${JSON.stringify(m.msgid)} vs ${JSON.stringify(translated)}`
        );
      }
    }
    expect(problems).toEqual([]);
  });

  it('reads as Chinese: no entry is left in English', () => {
    const english = all.filter(m => {
      const entry = catalogue[keyOf(m)];
      return (
        Array.isArray(entry) &&
        entry[0] === m.msgid &&
        // Figures, units and code identifiers stay as they are.
        /[a-z]{3,}\s+[a-z]{3,}/i.test(m.msgid) &&
        !/^GPU Hygiene$/.test(m.msgid)
      );
    });
    expect(english.map(m => m.msgid)).toEqual([]);
  });

  const bundle = zhBundle;

  it('translates through JupyterLab’s Gettext, plurals and placeholders included', () => {
    const trans = bundle();
    expect(trans.__('VRAM Panel')).toBe('显存面板');
    expect(trans.__('Restart kernel')).toBe('重启内核');
    expect(trans._n('%1 epoch', '%1 epochs', 3)).toBe('3 轮');
    expect(trans._n('%1 epoch', '%1 epochs', 1)).toBe('1 轮');
    expect(trans.__('CUDA out of memory in cell %1.', 7)).toBe(
      '单元格 7 中 CUDA 显存不足。'
    );
  });

  it('translates the settings schema in the browser (fetch transform)', () => {
    const schema = JSON.parse(
      fs.readFileSync(path.join(ROOT, 'schema', 'plugin.json'), 'utf-8')
    );
    const zh = translateSchema(schema, bundle() as any) as any;
    expect(zh.properties.warnOnStackedModels.title).toBe('模型堆叠警告');
    expect(zh.properties.cleanAction.oneOf[0].title).toBe(
      '插入到当前单元格下方并运行'
    );
    // Only titles, descriptions and the toolbar button's label: values,
    // defaults and the toolbar item itself (name, command, rank) stay.
    expect(zh.properties.cleanAction.oneOf[0].const).toBe('insert-and-run');
    expect(zh['jupyter.lab.toolbars']).toEqual({
      Notebook: [
        { ...schema['jupyter.lab.toolbars'].Notebook[0], label: '清理 GPU' }
      ]
    });
    expect(zh.properties.sampleIntervalMs.default).toBe(
      schema.properties.sampleIntervalMs.default
    );
    const left = schemaStrings(zh).filter(
      ({ text }) => text === 'GPU Hygiene' || !/[\u4e00-\u9fff]/.test(text)
    );
    // The product name stays as it is.
    expect(left.map(s => s.text)).toEqual(['GPU Hygiene', 'GPU Hygiene']);
    // The English schema is not changed.
    expect(schema.properties.warnOnStackedModels.title).toBe(
      'Warn on stacked models'
    );
  });
});
