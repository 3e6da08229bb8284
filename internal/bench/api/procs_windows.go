package api

import "syscall"

// procAttr: Windows has no process groups to put a child in.
func procAttr() *syscall.SysProcAttr { return nil }
