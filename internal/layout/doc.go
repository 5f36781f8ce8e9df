// Package layout has no code: its tests keep the house in order, as
// docs/development.md's layout section describes it. No package holds more
// than 3,000 lines of production code, and no import runs upward: the mains
// over the commands, the commands over the wirings, the wirings over the
// services, the services over the parts they share.
package layout
