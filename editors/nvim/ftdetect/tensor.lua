-- .tensor files (works on Neovim 0.7, which has no vim.filetype.add).
vim.cmd([[autocmd BufRead,BufNewFile *.tensor setfiletype tensor]])
