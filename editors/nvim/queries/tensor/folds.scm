(kernel_declaration) @fold
(level_list) @fold
(comment) @fold
