/**
 * Hostile conditions, what the kernel sends (issue 5, items 7, 8 and 10): a
 * real JupyterLab server, real ipykernels with torch on the CPU, the built
 * extension, Debian chromium.
 *
 * - 1000 malformed messages sent through the agent's real comm are dropped,
 *   counted and logged once, nothing is thrown, and the gauge keeps working;
 * - a class and a variable named `<img src=x onerror=alert(1)>` show as text
 *   in the toast, the gauge tooltip and the panel, and never reach code;
 * - the agent's own errors (an inventory that raises, NVML failing) show
 *   once in the gauge tooltip and never in a cell's output.
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import type { Page, TestInfo } from '@playwright/test';
import {
  clickToolbarClean,
  currentModel,
  gaugeDetails,
  openPanelFromGauge,
  watchPage
} from './probes';
import { cellSource, setCellSource } from './notebook-file';

// Galata's kernels fixture intercepts POST .../restart; a real restart needs it off.
test.use({ kernels: null, autoGoto: true });
// Known flake, not understood yet: in 1 of 4 full-suite runs (a fresh clone,
// 2026-12-01) the fuzz cell of the first test left the kernel "Busy" for the
// whole 3 min timeout; alone it passes (0.2 s in the kernel, 1.2-1.5 s to the
// 1000th count in the browser, 6 of 6 runs). One retry, so that a real
// failure still fails twice; the closing note says so.
test.describe.configure({ retries: 1 });

const gauge = '.jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';
const HOSTILE = '<img src=x onerror=alert(1)>';

function report(testInfo: TestInfo, type: string, value: unknown): void {
  const description = typeof value === 'string' ? value : JSON.stringify(value);
  testInfo.annotations.push({ type, description });
  console.log(`${type}: ${description}`);
}

async function newNotebook(
  page: IJupyterLabPageFixture,
  name: string
): Promise<void> {
  await page.notebook.createNew(name, { kernel: 'python3' });
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
}

/**
 * Put `source` into cell `index` (added at the end when missing) through the
 * notebook model: typing indented code would meet the editor's auto-indent.
 */
async function putCell(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
): Promise<void> {
  while ((await page.notebook.getCellCount()) <= index) {
    await page.notebook.addCell('code', 'pass');
  }
  await page.evaluate(
    ({ index, source }) => {
      const notebook = (window as any).jupyterapp.shell.currentWidget.content;
      notebook.widgets[index].model.sharedModel.setSource(source);
    },
    { index, source }
  );
}

/** The gauge's breakdown (its popup's text: headings, lines, notes), one entry per line. */
async function tooltip(page: Page): Promise<string[]> {
  return (await gaugeDetails(page)).split('\n');
}

/** Run code as another extension would: a silent execute, no cell. */
async function silentExecute(page: Page, code: string): Promise<string> {
  return page.evaluate(async source => {
    const kernel = (window as any).jupyterapp.shell.currentWidget.sessionContext
      .session.kernel;
    const reply = await kernel.requestExecute({
      code: source,
      silent: true,
      store_history: false
    }).done;
    return reply.content.status;
  }, code);
}

/**
 * A user cell that sends 1000 malformed messages through the agent's own
 * comm (under its send lock, as the sampler thread sends): mutations of the
 * agent's real hello, sample, inventory, error and cleaned messages, each
 * made invalid in one way, from a fixed seed.
 */
const FUZZ = String.raw`import json, random, sys
agent = sys.modules["_jupyterlab_gpu_hygiene_agent"]._agent
(comm,) = agent.comms.values()
valid = [
    agent.hello(),
    agent.sample(),
    agent.build_inventory(None),
    {"protocol": 2, "type": "error", "where": "sample", "message": "x"},
    {"protocol": 2, "type": "cleaned", "executionCount": 3,
     "models": {"before": 2, "after": 1}, "freed": {"cpu": 16},
     "allocated": None, "reserved": None},
]
rng = random.Random(5)

def wrong(value):
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return [value]
    if value is None:
        return {"none": 1}
    return 7  # list or dict

def junk(i):
    msg = json.loads(json.dumps(valid[i % len(valid)]))
    fields = [k for k in msg if k not in ("protocol", "type")]
    kind = (i // len(valid)) % 9
    if kind == 0:  # another protocol version
        msg["protocol"] = rng.choice([1, 3, "2", None, True, 2.5, 10**400])
    elif kind == 1:  # unknown message kind
        msg["type"] = rng.choice(["bogus", "", "HELLO", None, 7, ["hello"], "configure"])
    elif kind == 2:  # a missing field (not the optional ones: an older agent sends none)
        optional = ("limits", "unread", "keptErrors", "optimizers", "ram", "children")
        del msg[rng.choice([k for k in fields if k not in optional])]
    elif kind == 3:  # a field of the wrong type
        key = rng.choice(fields)
        msg[key] = wrong(msg[key])
    elif kind == 4:  # numbers no JavaScript integer holds, negative, fractional
        ints = [k for k in fields if type(msg[k]) is int or k == "executionCount"]
        msg[ints[0] if ints else "protocol"] = rng.choice([2**64, -1, 2**53 + 1, 1.5, 10**400])
    elif kind == 5:  # not an object at all
        msg = rng.choice([[1, 2], "hello", 42, True, [], None])
    elif kind == 6:  # an unknown kind in the right version
        msg = {"protocol": 2, "type": rng.choice(["ping", "status", "inventory2"]), "x": i}
    elif kind == 7:  # an error the browser does not know, or too long to show
        msg = {"protocol": 2, "type": "error", "where": "sample", "message": "x" * 10001}
        if i % 2:
            msg["where"] = rng.choice(["elsewhere", "", "NVML"])
    else:  # nested garbage
        msg = json.loads(json.dumps(valid[2]))
        msg["models"] = [{"id": "0x1", "order": -3, "className": None}]
    return msg

for i in range(1000):
    agent.transport.send(comm, junk(i))
print(i + 1)`;

test('1000 malformed messages through the real comm: dropped, counted, logged once', async ({
  page
}, testInfo) => {
  const seen = watchPage(page);
  await newNotebook(page, 'fuzz.ipynb');
  const before = (await currentModel(page))!;
  expect(before.status).toBe('ready');

  await putCell(page, 0, FUZZ);
  const started = Date.now();
  await page.notebook.runCell(0);
  expect(await page.notebook.getCellTextOutput(0)).toEqual(['1000\n']);
  await expect
    .poll(async () => (await currentModel(page))!.dropped - before.dropped)
    .toBe(1000);
  report(testInfo, 'rejected messages', 1000);
  report(
    testInfo,
    'cell start → 1000 rejects counted (ms)',
    Date.now() - started
  );

  // The UI keeps working: a later real inventory updates the gauge.
  await setCellSource(page, 1, 'import torch\nnet = torch.nn.Linear(8, 8)');
  await page.notebook.runCell(1);
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
  const after = (await currentModel(page))!;
  expect(after.status).toBe('ready');
  expect(after.pid).toBe(before.pid);
  expect(after.dropped - before.dropped).toBe(1000);

  const logged = seen.console.filter(line =>
    line.includes('dropped a malformed message')
  );
  report(testInfo, 'console lines about drops', logged.length);
  report(testInfo, 'the console line', logged[0] ?? '');
  expect(logged).toHaveLength(1);
  expect(logged[0]).toMatch(/^warning: /);
  expect(seen.console).toEqual(logged);
  expect(seen.pageErrors).toEqual([]);
});

test('a class and a variable named <img src=x onerror=alert(1)> show as text everywhere', async ({
  page
}, testInfo) => {
  const seen = watchPage(page);
  await newNotebook(page, 'hostile-names.ipynb');
  await putCell(
    page,
    0,
    [
      'import torch',
      `H = ${JSON.stringify(HOSTILE)}`,
      '',
      'def _init(self):',
      '    torch.nn.Module.__init__(self)',
      // 1 MiB: a stacked model below the toastMinMiB setting (default 1 MiB) raises no toast
      '    self.w = torch.nn.Parameter(torch.zeros(2**18))',
      '',
      'Evil = type(H, (torch.nn.Module,), {"__init__": _init})',
      'globals()[H] = Evil()',
      '',
      'class NoStorage(torch.Tensor):',
      '    def untyped_storage(self):',
      '        raise RuntimeError(H)',
      '',
      'class Odd(torch.nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.register_buffer("odd", torch.zeros(4).as_subclass(NoStorage))',
      '',
      'odd = Odd()'
    ].join('\n')
  );
  await page.notebook.runCell(0);
  await setCellSource(page, 1, 'second = Evil()');
  await page.notebook.runCell(1);

  // the toast
  const warning = page.locator(toast, { hasText: 'Stacked' });
  await expect(warning).toBeVisible();
  const toastText = (await warning.textContent()) ?? '';
  report(testInfo, 'toast text', toastText);
  expect(toastText).toContain(HOSTILE);
  // the gauge tooltip: no agent error. The buffer's untyped_storage override
  // raises with the name; the agent reads storages through torch's own C
  // accessors and never runs it (issue 46, item 2), so nothing is raised.
  await expect
    .poll(async () => (await tooltip(page)).join('\n'))
    .toMatch(/Live models/);
  expect(
    (await tooltip(page)).filter(line => line.startsWith('Agent error'))
  ).toEqual([]);
  // the panel
  await openPanelFromGauge(page);
  const panel = page.locator('#jp-GpuHygiene-panel');
  await expect(panel).toContainText(HOSTILE);
  // as a model's class and as the variable holding it
  expect(
    await panel.locator('.jp-GpuHygiene-path', { hasText: HOSTILE }).count()
  ).toBeGreaterThan(0);
  await expect(panel.locator('img')).toHaveCount(0);

  // Clean GPU: the generated cell names no such thing in code
  const cells = await page.notebook.getCellCount();
  await clickToolbarClean(page);
  await expect.poll(() => page.notebook.getCellCount()).toBe(cells + 1);
  let cleanIndex = -1;
  await expect
    .poll(async () => {
      for (let i = 0; i < cells + 1; i++) {
        if (
          (await cellSource(page, i)).startsWith('# gpu-hygiene: clear_gpu')
        ) {
          cleanIndex = i;
        }
      }
      return cleanIndex;
    })
    .toBeGreaterThan(-1);
  const code = await cellSource(page, cleanIndex);
  const codeLines = code
    .split('\n')
    .filter(line => !line.trimStart().startsWith('#'));
  expect(codeLines.filter(line => line.includes('<img'))).toEqual([]);
  const cleanCell = await page.notebook.getCellLocator(cleanIndex);
  await expect(cleanCell!.locator('.jp-InputPrompt')).toHaveText(/\[\d+\]:/);
  expect(await page.notebook.getCellTextOutput(cleanIndex)).toBeNull();
  // the hostile variable survived the clean
  await page.notebook.addCell('code', 'print(type(globals()[H]).__name__)');
  const last = (await page.notebook.getCellCount()) - 1;
  await page.notebook.runCell(last);
  expect(await page.notebook.getCellTextOutput(last)).toEqual([`${HOSTILE}\n`]);

  // nothing anywhere was parsed as HTML, nothing called alert()
  await expect(page.locator('img[src="x"]')).toHaveCount(0);
  report(testInfo, 'img[src=x] elements, dialog events', [
    await page.locator('img[src="x"]').count(),
    seen.dialogs.length
  ]);
  expect(seen.dialogs).toEqual([]);
  expect(seen.pageErrors).toEqual([]);
  expect(seen.console).toEqual([]);
});

test('agent errors show once in the gauge tooltip and never in a cell output', async ({
  page
}, testInfo) => {
  const seen = watchPage(page);
  await newNotebook(page, 'agent-errors.ipynb');
  // A real NVML failure on this machine (no driver library): from hello.
  const nvml = (await tooltip(page)).filter(line =>
    line.startsWith('VRAM not measurable: ')
  );
  report(testInfo, 'hello.nvmlError in the tooltip', nvml);
  expect(nvml).toHaveLength(1);
  expect(nvml[0]).toContain('NVML');

  // Break two internals, as another extension's silent execute might: the
  // inventory raises, and NVML fails on every sample ("Driver Not Loaded").
  const agent =
    "__import__('sys').modules['_jupyterlab_gpu_hygiene_agent']._agent";
  expect(
    await silentExecute(
      page,
      [
        `${agent}.inventory.fresh = lambda *a: 1 / 0`,
        `${agent}.devices.sample = lambda on_error=None: (on_error(RuntimeError("NVML: Driver Not Loaded")), [])[1]`
      ].join('\n')
    )
  ).toBe('ok');
  const cells = ['a = [1]', 'b = [2]', "raise ValueError('user error')"];
  for (const [i, code] of cells.entries()) {
    await setCellSource(page, i, code);
    await page.notebook.runCell(i);
  }
  await expect
    .poll(async () =>
      (await tooltip(page))
        .filter(line => line.startsWith('Agent error ('))
        .sort()
    )
    .toEqual([
      'Agent error (inventory): ZeroDivisionError: division by zero',
      'Agent error (nvml): RuntimeError: NVML: Driver Not Loaded'
    ]);
  // Still once after more cells and samples.
  await setCellSource(page, 3, 'c = [3]');
  await page.notebook.runCell(3);
  await expect
    .poll(async () => (await currentModel(page))!.errors.length)
    .toBe(2);
  const lines = await tooltip(page);
  report(
    testInfo,
    'agent error lines in the tooltip',
    lines.filter(line => line.startsWith('Agent error ('))
  );
  expect(lines.filter(line => line.includes('division by zero'))).toHaveLength(
    1
  );
  expect(lines.filter(line => line.includes('Driver Not Loaded'))).toHaveLength(
    1
  );
  // the user's cells show their own output only
  expect(await page.notebook.getCellTextOutput(0)).toBeNull();
  expect(await page.notebook.getCellTextOutput(1)).toBeNull();
  expect(await page.notebook.getCellTextOutput(3)).toBeNull();
  const userError = (await page.notebook.getCellTextOutput(2))!.join('');
  expect(userError).toContain('ValueError');
  expect(userError).not.toMatch(/ZeroDivision|Driver Not Loaded|gpu_hygiene/);

  // A restart forgets the errors of the old process.
  await page.evaluate(async () => {
    await (
      window as any
    ).jupyterapp.shell.currentWidget.sessionContext.restartKernel();
  });
  await expect
    .poll(async () => (await currentModel(page))?.status, { timeout: 120000 })
    .toBe('ready');
  expect(
    (await tooltip(page)).filter(line => line.startsWith('Agent error ('))
  ).toEqual([]);
  expect(seen.pageErrors).toEqual([]);
  expect(seen.console).toEqual([]);
});
