; A kernel is a scope; its index variables are locals. Tensors and formats
; are defined by their declarations.
(kernel_declaration) @local.scope
(assignment lhs: (access index: (index_variable (identifier) @local.definition)))
(index_variable (identifier) @local.reference)
(tensor_declaration name: (identifier) @local.definition)
(format_declaration name: (identifier) @local.definition)
(access tensor: (identifier) @local.reference)
