-- Loaded on start: user commands; the server starts per buffer (see
-- lua/tensor/init.lua).
if vim.g.loaded_tensor then
  return
end
vim.g.loaded_tensor = true
vim.api.nvim_create_user_command('TensorShowC', function(o) require('tensor').show(o.args ~= '' and o.args or 'c') end, { nargs = '?' })
vim.api.nvim_create_user_command('TensorTime', function() require('tensor').time() end, {})
vim.cmd([[autocmd FileType tensor lua require('tensor').attach()]])
