" Vim syntax for .tensor files: the fallback where the tree-sitter parser
" is not available (tree-sitter-tensor/queries/highlights.scm is the
" reference; keep the groups in step with it).
if exists('b:current_syntax')
  finish
endif

syn keyword tensorKeyword format tensor kernel order
syn keyword tensorLevel dense compressed singleton range offset hashed
syn keyword tensorProperty nonunique unordered full aos
syn match tensorPreset /\(@\s*\)\@<=[A-Za-z_][A-Za-z0-9_]*\(-[A-Za-z0-9_]\+\)*/
syn match tensorType /\(:\s*\)\@<=[a-z][a-z0-9]*\ze\s*\[/
syn match tensorDimension /\(\[\)\@<=[^\]]*\ze\]/ contains=tensorNumber
syn match tensorDeclName /\(\<\(tensor\|format\)\s\+\)\@<=[A-Za-z_][A-Za-z0-9_]*/
syn match tensorKernelName /\(\<kernel\s\+\)\@<=[A-Za-z_][A-Za-z0-9_]*/
syn match tensorSource /\(=\s*\)\@<=[A-Za-z_][A-Za-z0-9_]*\ze\s*(/
syn match tensorNumber /\<\d\+\(\.\d*\)\=\([eE][+-]\=\d\+\)\=\>/
syn match tensorOperator /+=\|[=+\-*@]/
syn region tensorString start=/"/ skip=/\\./ end=/"/ oneline
syn match tensorComment /\/\/.*$/ contains=@Spell
syn region tensorComment start=/\/\*/ end=/\*\// contains=@Spell

hi def link tensorKeyword Keyword
hi def link tensorLevel Type
hi def link tensorProperty Special
hi def link tensorPreset Type
hi def link tensorType Type
hi def link tensorDimension Constant
hi def link tensorDeclName Identifier
hi def link tensorKernelName Function
hi def link tensorSource Function
hi def link tensorNumber Number
hi def link tensorOperator Operator
hi def link tensorString String
hi def link tensorComment Comment

let b:current_syntax = 'tensor'
