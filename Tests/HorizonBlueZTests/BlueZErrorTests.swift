import HorizonDBus
import Testing

@testable import HorizonBlueZ

@Suite("BlueZ errors: kinds from D-Bus error names")
struct BlueZErrorTests {
    static let kindsByName: [(String, BlueZError.Kind)] = [
        ("org.bluez.Error.NotReady", .notReady),
        ("org.bluez.Error.InProgress", .inProgress),
        ("org.bluez.Error.NotPermitted", .notPermitted),
        ("org.bluez.Error.Failed", .failed),
        ("org.bluez.Error.DoesNotExist", .doesNotExist),
        ("org.bluez.Error.AlreadyExists", .alreadyExists),
        ("org.bluez.Error.NotSupported", .notSupported),
        ("org.bluez.Error.InvalidArguments", .invalidArguments),
        ("org.bluez.Error.NotAuthorized", .notAuthorized),
        ("org.bluez.Error.NotAvailable", .notAvailable),
        ("org.bluez.Error.NotConnected", .notConnected),
        ("org.bluez.Error.AlreadyConnected", .alreadyConnected),
        ("org.bluez.Error.InvalidLength", .invalidLength),
        ("org.bluez.Error.InvalidOffset", .invalidOffset),
        ("org.bluez.Error.AuthenticationFailed", .authenticationFailed),
        ("org.freedesktop.DBus.Error.ServiceUnknown", .serviceUnknown),
        ("org.freedesktop.DBus.Error.NameHasNoOwner", .serviceUnknown),
        ("org.freedesktop.DBus.Error.AccessDenied", .accessDenied),
        ("org.freedesktop.DBus.Error.NoServer", .noServer),
        ("org.freedesktop.DBus.Error.NoReply", .noReply),
        ("org.freedesktop.DBus.Error.Timeout", .timedOut),
        ("org.freedesktop.DBus.Error.TimedOut", .timedOut),
        ("org.freedesktop.DBus.Error.UnknownObject", .unknownObject),
        ("org.freedesktop.DBus.Error.UnknownMethod", .unknownMethod),
        ("org.freedesktop.DBus.Error.UnknownInterface", .unknownInterface),
        ("org.freedesktop.DBus.Error.UnknownProperty", .unknownProperty),
        ("org.freedesktop.DBus.Error.Disconnected", .disconnected),
    ]

    @Test(arguments: kindsByName)
    func eachNameHasItsKind(name: String, kind: BlueZError.Kind) {
        let error = BlueZError(DBusError(name: name, message: "whatever it says"))
        #expect(error.kind == kind)
        #expect(error.name == name)
        #expect(error.message == "whatever it says")
    }

    @Test func everyKindButOtherIsNamedAndItsNameParsesBack() {
        for kind in BlueZError.Kind.allCases where kind != .other {
            #expect(kind.errorName.map(BlueZError.Kind.init(errorName:)) == kind, "\(kind)")
        }
        #expect(Set(Self.kindsByName.map(\.1)) == Set(BlueZError.Kind.allCases).subtracting([.other]))
    }

    @Test func unknownNamesAndNearMissesAreOther() {
        for name in [
            "org.bluez.Error.Something", "org.horizon.Error.NotATerminal", "org.bluez.Error.failed",
            "org.bluez.Error.InProgress.Extra", "", "radio-server",
        ] {
            #expect(BlueZError(name: name).kind == .other, "\(name)")
        }
    }

    @Test func aFailedErrorsReasonIsItsWholeMessage() {
        func reason(_ message: String, name: String = "org.bluez.Error.Failed") -> BlueZError.Reason? {
            BlueZError(name: name, message: message).reason
        }
        #expect(reason("le-connection-abort-by-local") == .connectionAbortedLocally)
        #expect(reason("Software caused connection abort") == .connectionAbortedLocally)
        #expect(reason("Operation already in progress") == .alreadyInProgress)
        #expect(reason("Connection refused") == .connectionRefused)
        #expect(reason("Input/output error") == .inputOutput)
        #expect(reason("le-connection-abort-by-local (103)") == nil)
        #expect(reason("Operation failed") == nil)
        #expect(reason("le-connection-abort-by-local", name: "org.bluez.Error.InProgress") == nil)
    }

    @Test func ourRepliesToBluetoothdCarryBlueZsNames() {
        #expect(BlueZError.reply(.notSupported, "no").name == "org.bluez.Error.NotSupported")
        #expect(
            BlueZError.reply(.notPermitted, "taken")
                == DBusError(name: "org.bluez.Error.NotPermitted", message: "taken"))
        #expect(BlueZError(name: "org.bluez.Error.Failed", message: "x").description == "x (org.bluez.Error.Failed)")
    }
}
