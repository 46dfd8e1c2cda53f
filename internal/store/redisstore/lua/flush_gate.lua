
pending_gate(KEYS[1], KEYS[2], ARGV[3], tonumber(ARGV[1]), tonumber(ARGV[2]), 4)
return 1
