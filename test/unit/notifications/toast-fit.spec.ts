/**
 * Toasts fit JupyterLab's 140 characters with the long class names and
 * checkpoints of the LLM era, in English and in zh_CN (issue 29, item 1):
 * JupyterLab cuts a longer message ("…newer BertForSequenceClassifi…"), so
 * each toast shortens itself (fewer names, the kind without its checkpoint,
 * long names cut in the middle) and never ends in a cut sentence; "+2" is
 * said in words. The toasts are those the real notifier raises for
 * inventories as the agent sends them (the fixtures' shape).
 */
import { Notification } from '@jupyterlab/apputils';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { GpuKernelModel } from '../../../src/model';
import { GpuNotifier } from '../../../src/notifications';
import type { IInventory, IModelInfo } from '../../../src/protocol';
import { c01Inventory, held, OneModelMonitor, yolo } from '../fixtures';
import { zhBundle } from '../zh-bundle';
import { withNotebook } from '../../../src/notifications/text';

const GiB = 2 ** 30;

/** A transformers model as the agent reports it (label: class (checkpoint)). */
function hf(
  className: string,
  checkpoint: string,
  overrides: Partial<IModelInfo>
): IModelInfo {
  return yolo({
    className,
    module: 'transformers.models.auto',
    family: 'transformers',
    label: `${className} (${checkpoint})`,
    bytes: { 'cuda:0': 15 * GiB },
    ...overrides
  });
}

function onCuda(models: IModelInfo[]): IInventory {
  return { ...c01Inventory(), cudaInitialized: true, roots: [], models };
}

const LLAMA = ['LlamaForCausalLM', 'meta-llama/Llama-3.1-8B-Instruct'] as const;
const BERT = [
  'BertForSequenceClassification',
  'google-bert/bert-large-uncased-whole-word-masking-finetuned-squad'
] as const;
const QWEN = [
  'Qwen2_5_VLForConditionalGeneration',
  'Qwen/Qwen2.5-VL-72B-Instruct-AWQ'
] as const;
const outputs = (n: number) => held('output', `Out[${n}]`);
/** A class name that is markup (hostile-input.spec.ts): shown whole, as text. */
const HOSTILE = '<img src=x onerror=alert(1)>';

/** Scenarios: what the toast must still name (a prefix of each name). */
const SCENARIOS: Array<[string, IInventory, string[]]> = [
  [
    'a re-run LLM cell, the old one held by the output cache',
    onCuda([
      hf(...LLAMA, {
        id: 'a',
        order: 1,
        stale: true,
        holders: [outputs(12), held('output', '_12'), held('output', '__')]
      }),
      hf(...LLAMA, { id: 'b', order: 2 })
    ]),
    ['LlamaFor', 'Out[12]']
  ],
  [
    'a long variable still names the older classifier',
    onCuda([
      hf(...BERT, {
        id: 'a',
        order: 1,
        holders: [held('variable', 'fine_tuned_sequence_classifier_v2')]
      }),
      hf(...BERT, { id: 'b', order: 2 })
    ]),
    // whole names in a shorter sentence rather than names cut in the middle
    ['BertForSequenceClassification', 'fine_tuned_sequence_classifier_v2']
  ],
  [
    'three older instances, many holders, and a second stack',
    onCuda([
      // plain torch modules stack by class: a second stack, told in words
      ...[1, 2].map(i =>
        yolo({
          id: `t${i}`,
          order: i,
          className: 'SwinTransformerV2ForMaskedImageModelingBackbone',
          module: '__main__',
          family: 'torch',
          label: 'SwinTransformerV2ForMaskedImageModelingBackbone',
          bytes: { 'cuda:0': GiB },
          stale: i === 1,
          holders: i === 1 ? [outputs(4)] : [held('variable', 'backbone')]
        })
      ),
      // transformers models stack by family: Qwen after BERT counts
      hf(...BERT, { id: 'b1', order: 3, stale: true, holders: [outputs(5)] }),
      ...[4, 5, 6].map(i =>
        hf(...QWEN, {
          id: `q${i}`,
          order: i,
          stale: true,
          holders: Array.from({ length: 9 }, (_, k) => outputs(10 * i + k))
        })
      ),
      hf(...QWEN, { id: 'q7', order: 7 })
    ]),
    ['Qwen2_5', 'Out[6']
  ],
  [
    'a class and a variable named like markup, 1 MiB: whole names',
    onCuda([
      yolo({
        id: 'h1',
        order: 1,
        className: HOSTILE,
        module: '__main__',
        family: 'torch',
        label: HOSTILE,
        bytes: { cpu: 2 ** 20 },
        holders: [held('variable', HOSTILE)]
      }),
      yolo({
        id: 'h2',
        order: 2,
        className: HOSTILE,
        module: '__main__',
        family: 'torch',
        label: HOSTILE,
        bytes: { cpu: 2 ** 20 },
        holders: [held('variable', 'second')]
      })
    ]),
    [HOSTILE]
  ],
  [
    'a lone stale model (the findings toast)',
    onCuda([
      hf(...BERT, {
        id: 'a',
        order: 1,
        stale: true,
        holders: Array.from({ length: 7 }, (_, k) => outputs(k + 3))
      })
    ]),
    ['BertFor']
  ]
];

describe.each([
  ['English', nullTranslator.load('jupyterlab_gpu_hygiene')],
  ['zh_CN', zhBundle() as unknown as TranslationBundle]
])('toasts with long model names fit (%s)', (_locale, trans) => {
  afterEach(() => Notification.dismiss());

  it.each(SCENARIOS)('%s', (_title, inventory, named) => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model),
      commands: new CommandRegistry(),
      trans
    });
    model.apply(inventory);
    const messages = Notification.manager.notifications.map(t => t.message);
    notifier.dispose();
    expect(messages.length).toBeGreaterThan(0);
    for (const message of messages) {
      expect(message.length).toBeLessThanOrEqual(140);
      // shortened by composition, not cut by the length
      expect(message).not.toMatch(/…$/);
      expect(message).not.toMatch(/\+\d/);
    }
    const all = messages.join('\n');
    for (const name of named) {
      expect(all).toContain(name);
    }
  });
});

describe('a toast names its notebook (issue 29, item 5)', () => {
  const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
  afterEach(() => Notification.dismiss());

  it('puts the notebook before the message, without .ipynb or cut in the middle to fit, never cutting the message', () => {
    expect(withNotebook('train.ipynb', 'Stacked YOLO: …', trans)).toBe(
      'train.ipynb: Stacked YOLO: …'
    );
    expect(withNotebook(null, 'Stacked YOLO', trans)).toBe('Stacked YOLO');
    const long = 'x'.repeat(120);
    const named = withNotebook(
      'a-very-long-experiment-name-for-fine-tuning.ipynb',
      long,
      trans
    );
    expect(named.length).toBeLessThanOrEqual(140);
    expect(named.endsWith(long)).toBe(true);
    expect(named).toMatch(/^a-very-lo…e-tuning: x/);
    // a name that fits without ".ipynb" loses that first, never a cut
    expect(withNotebook('trained.ipynb', 'z'.repeat(129), trans)).toBe(
      `trained: ${'z'.repeat(129)}`
    );
    // no room for 8 characters of it: the message alone
    expect(withNotebook('train.ipynb', 'y'.repeat(135), trans)).toBe(
      'y'.repeat(135)
    );
  });

  it('the notifier names the notebook of the kernel in every toast', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model);
    (monitor as any).panelFor = () => ({ title: { label: 'stacked.ipynb' } });
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    model.apply(c01Inventory());
    const messages = Notification.manager.notifications.map(t => t.message);
    notifier.dispose();
    expect(messages).toEqual([
      'stacked.ipynb: Stacked YOLO: older YOLO (yolov8n.yaml), 12.1 MiB, held only by Out[2], _2, __; newer YOLO (yolov8n.yaml), 12.1 MiB in RAM.'
    ]);
  });
});
