// Package sockopt applies socket options through a per-connection Guard that
// remembers what it applied, so setting an option to the value already in
// effect costs no syscall.
//
// Contract:
//
//   - A Guard starts with every option "not applied": a sentinel that no
//     accepted value can equal, so the first Set of any value (0 included)
//     always reaches the kernel.
//   - Set makes the setsockopt call only when the requested value differs from
//     the recorded one; a call that fails records nothing and returns the
//     kernel error wrapped with the option's name (errors.Is keeps the errno).
//   - Options set behind the Guard's back (by another package, or by the Go
//     runtime when it creates the socket) are unknown to it; Assume records a
//     value known to be in effect without a syscall.
//   - A Guard is safe for concurrent use; Set calls on one Guard are
//     serialised so the record always matches the kernel.
//
// On Linux the options are set with golang.org/x/sys/unix through
// syscall.RawConn.Control; on other systems every Set returns ErrUnsupported.
package sockopt
