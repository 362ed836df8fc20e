// Unit tests (jest): pure analysis, protocol validation, formatting, views.
// Based on JupyterLab's own jest configuration.
const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

const esModules = [
  '@codemirror',
  '@jupyter/ydoc',
  '@jupyter/react-components',
  '@jupyter/web-components',
  '@jupyterlab/',
  '@microsoft',
  'exenv-es6',
  'lib0',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs'
].join('|');

const baseConfig = jestJupyterLab(__dirname);

module.exports = {
  ...baseConfig,
  reporters: ['default'],
  automock: false,
  setupFiles: [...baseConfig.setupFiles, '<rootDir>/test/unit/setup.js'],
  setupFilesAfterEnv: [
    ...(baseConfig.setupFilesAfterEnv ?? []),
    '<rootDir>/test/unit/preload.ts'
  ],
  roots: ['<rootDir>/src', '<rootDir>/test/unit'],
  modulePathIgnorePatterns: [
    '<rootDir>/.venv/',
    '<rootDir>/lib/',
    '<rootDir>/jupyterlab_gpu_hygiene/'
  ],
  testRegex: 'test/unit/.*\\.spec\\.tsx?$',
  collectCoverageFrom: [
    'src/**/*.{ts,tsx}',
    '!src/**/*.d.ts',
    '!src/_generated/**'
  ],
  // ts-jest only transpiles (tsconfig.jest.json: isolatedModules), file by file: the types of
  // src/ and test/unit/ are checked once, by `tsc -p tsconfig.test.json` in make lint.
  transform: {
    ...baseConfig.transform,
    '^.+\\.tsx?$': ['ts-jest/legacy', { tsconfig: './tsconfig.jest.json' }]
  },
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`],
  testTimeout: 20000
};
