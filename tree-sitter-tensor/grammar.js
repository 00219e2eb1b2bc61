/**
 * Tree-sitter grammar of the `.tensor` language: format declarations,
 * tensor declarations with shapes, formats and data sources, and kernels
 * of index-notation assignments. Shared by the compiler (which lowers this
 * tree to its AST) and the editors.
 */

const commaSep = (rule) => optional(commaSep1(rule));
const commaSep1 = (rule) => seq(rule, repeat(seq(',', rule)), optional(','));

const PREC = { sum: 1, product: 2, unary: 3 };

module.exports = grammar({
  name: 'tensor',

  extras: ($) => [/\s/, $.comment],

  word: ($) => $.identifier,

  rules: {
    source_file: ($) => repeat($._item),

    _item: ($) => choice($.format_declaration, $.tensor_declaration, $.kernel_declaration),

    comment: (_) => token(choice(seq('//', /[^\n]*/), seq('/*', /[^*]*\*+([^/*][^*]*\*+)*/, '/'))),

    // format CSR = (dense, compressed)
    format_declaration: ($) => seq('format', field('name', $.identifier), '=', field('format', $._format)),

    _format: ($) => choice($.format_ref, $.level_list),

    // A preset or declared format, with arguments for blocked presets:
    // CSR, COO-AoS, mode-generic, BCSR(4).
    format_ref: ($) => seq(field('name', $.format_name), optional(seq('(', commaSep(field('argument', $.number)), ')'))),

    format_name: (_) => token(/[A-Za-z_][A-Za-z0-9_]*(-[A-Za-z0-9_]+)*/),

    // (dense, compressed(nonunique)) order (1, 0)
    level_list: ($) => seq('(', commaSep1(field('level', $.level)), ')', optional(field('order', $.mode_order))),

    level: ($) => seq(field('name', $.identifier), optional(seq('(', commaSep(field('property', $.property)), ')'))),

    property: ($) => choice(field('flag', $.identifier), seq(field('key', $.identifier), '=', field('value', $.number))),

    mode_order: ($) => seq('order', '(', commaSep1(field('mode', $.number)), ')'),

    // tensor A : f64[M, N] @ CSR = mtx("a.mtx")
    tensor_declaration: ($) =>
      seq(
        'tensor',
        field('name', $.identifier),
        ':',
        field('type', $.identifier),
        field('shape', $.shape),
        '@',
        field('format', $._format),
        optional(seq('=', field('source', $.source))),
      ),

    shape: ($) => seq('[', commaSep(field('dimension', choice($.number, $.identifier))), ']'),

    source: ($) => seq(field('function', $.identifier), '(', commaSep(field('argument', $.argument)), ')'),

    argument: ($) => seq(optional(seq(field('name', $.identifier), ':')), field('value', choice($.string, $.number, $.identifier))),

    // kernel spmv { y(i) = A(i,j) * x(j) }
    kernel_declaration: ($) => seq('kernel', field('name', $.identifier), '{', repeat(seq(field('statement', $.assignment), optional(';'))), '}'),

    assignment: ($) => seq(field('lhs', $.access), field('operator', choice('=', '+=')), field('rhs', $._expression)),

    _expression: ($) => choice($.binary_expression, $.unary_expression, $.parenthesized_expression, $.access, $.number),

    binary_expression: ($) =>
      choice(
        prec.left(PREC.sum, seq(field('left', $._expression), field('operator', choice('+', '-')), field('right', $._expression))),
        prec.left(PREC.product, seq(field('left', $._expression), field('operator', '*'), field('right', $._expression))),
      ),

    unary_expression: ($) => prec(PREC.unary, seq(field('operator', '-'), field('operand', $._expression))),

    parenthesized_expression: ($) => seq('(', field('expression', $._expression), ')'),

    // A(i,j), a, a()
    access: ($) => prec.right(seq(field('tensor', $.identifier), optional(seq('(', commaSep(field('index', $.index_variable)), ')')))),

    index_variable: ($) => $.identifier,

    identifier: (_) => /[A-Za-z_][A-Za-z0-9_]*/,

    number: (_) => token(/(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/),

    string: (_) => token(seq('"', repeat(choice(/[^"\\\n]/, /\\./)), '"')),
  },
});
