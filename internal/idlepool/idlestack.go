package idlepool

// A key's idle stack: its idle connections, oldest first, are keyCold.spill
// followed by top[:ntop]; nidle counts both. The newest DefaultMaxIdlePerKey
// entries live in the keyState itself and the oldest spill over into
// keyCold. A get takes from top and a put pushes onto it, so a get + put on
// a key touches only its keyState however many connections it keeps idle;
// the spill is touched only by a put onto a full top (which moves top's
// oldest entry to the spill), by a get that finds top empty, and by expiry,
// eviction and CloseIdle, which take the oldest. Entries in the spill are
// older than those in top, so every prefix of the whole stack is older than
// what follows it, as the watermark and eviction need.

// pushIdle adds e as the most recently used idle connection.
func (ks *keyState[K, C]) pushIdle(e idleEntry[C]) {
	ks.nidle++
	if n := int(ks.ntop); n < len(ks.top) {
		ks.top[n] = e
		ks.ntop++
		return
	}
	ks.spill = append(ks.spill, ks.top[0])
	copy(ks.top[:], ks.top[1:])
	ks.top[len(ks.top)-1] = e
}

// popIdle removes and returns the most recently used idle connection; ks
// must have one.
func (ks *keyState[K, C]) popIdle() idleEntry[C] {
	ks.nidle--
	if n := ks.ntop - 1; n >= 0 {
		e := ks.top[n]
		ks.top[n] = idleEntry[C]{}
		ks.ntop = n
		return e
	}
	n := len(ks.spill) - 1
	e := ks.spill[n]
	ks.spill[n] = idleEntry[C]{}
	ks.spill = ks.spill[:n]
	return e
}

// oldestIdle returns the entry that has been idle longest; ks must have one.
func (ks *keyState[K, C]) oldestIdle() idleEntry[C] {
	if len(ks.spill) > 0 {
		return ks.spill[0]
	}
	return ks.top[0]
}

// newestIdle returns the most recently used entry; ks must have one.
func (ks *keyState[K, C]) newestIdle() idleEntry[C] {
	if ks.ntop > 0 {
		return ks.top[ks.ntop-1]
	}
	return ks.spill[len(ks.spill)-1]
}

// idleAt returns the i-th oldest idle entry (0 is the oldest).
func (ks *keyState[K, C]) idleAt(i int) idleEntry[C] {
	if i < len(ks.spill) {
		return ks.spill[i]
	}
	return ks.top[i-len(ks.spill)]
}

// dropOldestIdle removes the n oldest idle entries (n at most nidle) and
// appends their connections to out.
func (ks *keyState[K, C]) dropOldestIdle(n int, out []C) []C {
	fromSpill := min(n, len(ks.spill))
	for _, e := range ks.spill[:fromSpill] {
		out = append(out, e.c)
	}
	kept := copy(ks.spill, ks.spill[fromSpill:])
	clear(ks.spill[kept:])
	ks.spill = ks.spill[:kept]

	fromTop := n - fromSpill
	for _, e := range ks.top[:fromTop] {
		out = append(out, e.c)
	}
	kept = copy(ks.top[:], ks.top[fromTop:ks.ntop])
	clear(ks.top[kept:])
	ks.ntop = int32(kept)
	ks.nidle -= int32(n)
	return out
}

// eachIdle calls f with every idle connection, oldest first.
func (ks *keyState[K, C]) eachIdle(f func(C)) {
	for _, e := range ks.spill {
		f(e.c)
	}
	for _, e := range ks.top[:ks.ntop] {
		f(e.c)
	}
}
