// ESLint flat config: typescript-eslint, React, the Jupyter plugin's recommended rules, prettier last.
import jupyter from '@jupyter/eslint-plugin';
import prettier from 'eslint-config-prettier';
import react from 'eslint-plugin-react';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'lib/',
      'coverage/',
      'jupyterlab_gpu_hygiene/labextension/',
      '.venv/',
      'src/_generated/',
      'test-results/',
      'playwright-report/',
      // build stamps and the browser code compiled for node (pytest, gpu-check)
      '.make/',
      '**/*.d.ts'
    ]
  },
  ...tseslint.configs.recommended,
  ...jupyter.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    plugins: { react },
    languageOptions: {
      globals: { ...globals.browser, ...globals.node }
    },
    settings: { react: { version: '18.2' } },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        {
          selector: 'interface',
          format: ['PascalCase'],
          custom: { regex: '^I[A-Z]', match: true }
        }
      ],
      '@typescript-eslint/no-unused-vars': ['warn', { args: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-require-imports': 'off',
      curly: ['error', 'all'],
      eqeqeq: 'error',
      'prefer-arrow-callback': 'error',
      'react/jsx-key': 'error',
      'no-console': ['error', { allow: ['warn', 'error'] }]
    }
  },
  {
    files: ['test/**/*.ts', 'test/**/*.tsx', '*.config.js', '*.config.ts'],
    rules: {
      'jupyter/no-untranslated-string': 'off',
      'no-console': 'off'
    }
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: { globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' }
  },
  prettier
);
