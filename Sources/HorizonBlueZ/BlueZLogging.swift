import Logging

extension Logger {
    /// The BlueZ radio's logger when the app gives none: silent. The radio logs each D-Bus step it
    /// takes with bluetoothd (discovery, sightings, connects and their retries, registrations,
    /// notify sockets, links opening and closing) at `trace` level, for troubleshooting.
    public static let bluezSilent = Logger(label: "horizon.bluez") { _ in SwiftLogNoOpLogHandler() }
}
