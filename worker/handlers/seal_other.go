//go:build !linux

package handlers

// SealProcess copies nothing and changes nothing here but the environment:
// forget unsets the secret AX_ variables (secretEnv) once the caller has
// read its configuration. The /proc and PR_SET_DUMPABLE protections are
// Linux's.
func SealProcess() (forget func(), err error) {
	return forgetter(secretNames()), nil
}
