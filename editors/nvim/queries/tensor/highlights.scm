; General captures first: later patterns win when two capture one node.
(comment) @comment
(number) @number
(string) @string
(identifier) @variable

["format" "tensor" "kernel" "order"] @keyword
["=" "+=" "+" "-" "*" "@" ":"] @operator
["(" ")" "[" "]" "{" "}"] @punctuation.bracket
["," ";"] @punctuation.delimiter

(format_declaration name: (identifier) @type.definition)
(format_ref name: (format_name) @type.builtin)
(level name: (identifier) @type)
(property flag: (identifier) @attribute)
(property key: (identifier) @attribute)
(tensor_declaration name: (identifier) @variable.definition)
(tensor_declaration type: (identifier) @type)
(shape dimension: (identifier) @constant)
(source function: (identifier) @function.call)
(argument name: (identifier) @property)
(kernel_declaration name: (identifier) @function)
(access tensor: (identifier) @variable)
(index_variable (identifier) @variable.parameter)
